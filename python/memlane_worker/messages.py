"""Building and parsing envelopes: the msgpack map that opens every multipart message."""
from __future__ import annotations

import itertools
import os
from typing import Any

import msgpack

from .errors import MalformedMessage
from .protocol import MESSAGE_TYPES, PROTOCOL_VERSION

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """A unique id for messages the worker starts itself (hello, mark ids are task ids)."""
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


def envelope(type_: str, id_: str, **fields: Any) -> dict[str, Any]:
    assert type_ in MESSAGE_TYPES, type_
    return {"v": PROTOCOL_VERSION, "type": type_, "id": id_, **fields}


def pack(env: dict[str, Any]) -> bytes:
    return msgpack.packb(env, use_bin_type=True)


def error(id_: str, code: int, message: str, details: dict[str, Any] | None = None,
          traceback: str | None = None) -> dict[str, Any]:
    env = envelope("error", id_, code=code, message=message)
    if details:
        env["details"] = details
    if traceback:
        env["traceback"] = traceback
    return env


def parse(raw: bytes | memoryview) -> dict[str, Any]:
    """The envelope map; raises MalformedMessage (with any id found) when it is not one."""
    try:
        env = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise MalformedMessage(f"envelope is not valid msgpack: {type(e).__name__}: {e}") from None
    if not isinstance(env, dict):
        raise MalformedMessage(f"envelope must be a msgpack map, got {type(env).__name__}")
    missing = [k for k in ("v", "type", "id") if k not in env]
    if missing:
        raise MalformedMessage(f"envelope lacks {', '.join(missing)}", {"missing": missing, "id": _id_of(env)})
    if not isinstance(env["v"], int) or isinstance(env["v"], bool):
        raise MalformedMessage(f"envelope v must be an integer, got {env['v']!r}", {"id": _id_of(env)})
    if not isinstance(env["type"], str):
        raise MalformedMessage(f"envelope type must be a string, got {env['type']!r}", {"id": _id_of(env)})
    if not isinstance(env["id"], str):
        raise MalformedMessage(f"envelope id must be a string, got {env['id']!r}")
    return env


def id_of(packed: bytes) -> str:
    """The id of an envelope this worker packed itself ("" if it has none)."""
    try:
        return _id_of(msgpack.unpackb(packed, raw=False, strict_map_key=False))
    except Exception:
        return ""


def _id_of(env: dict[str, Any]) -> str:
    value = env.get("id")
    return value if isinstance(value, str) else ""
