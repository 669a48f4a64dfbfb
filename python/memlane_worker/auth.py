"""What a spawned worker gets from the orchestrator's environment: its per-spawn key (proved
in hello.auth, docs/protocol.md "Trust"), the run's message size limit, and on another host
the CURVE keys that reach the broker over the network (docs/distributed.md)."""
from __future__ import annotations

import ctypes
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

from .protocol import (
    DEFAULT_MAX_MESSAGE_BYTES, ENV_CURVE_PUBLIC_KEY, ENV_CURVE_SECRET_KEY, ENV_CURVE_SERVER_KEY,
    ENV_MAX_MESSAGE_BYTES, ENV_WORKER_KEY, HELLO_AUTH_PREFIX, RANK_KEY_PREFIX,
)

_Z85_KEY = re.compile(r"[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}")


@dataclass(frozen=True)
class CurveKeys:
    """A CURVE client's keys (Z85 text): the server it pins, and its own keypair."""
    server: str
    public: str
    secret: str


def take_key() -> bytes | None:
    """The per-spawn key, removed from os.environ so that nothing this worker starts inherits
    it, and overwritten where /proc/self/environ shows it (the process's original block)."""
    _wipe_original(ENV_WORKER_KEY)
    text = os.environ.pop(ENV_WORKER_KEY, None)
    if not text:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise SystemExit(f"memlane-worker: {ENV_WORKER_KEY} must be hex, got {len(text)} characters that are not") from None
    return key


def take_curve() -> CurveKeys | None:
    """The CURVE client keys when the orchestrator is on another host, else None (a local
    worker talks over ipc or loopback, where the hello's proof is enough). The secret leaves
    the environment like the key does. All three or none: a partial set is a clear error."""
    names = (ENV_CURVE_SERVER_KEY, ENV_CURVE_PUBLIC_KEY, ENV_CURVE_SECRET_KEY)
    _wipe_original(ENV_CURVE_SECRET_KEY)
    values = [os.environ.get(n) for n in names[:2]] + [os.environ.pop(ENV_CURVE_SECRET_KEY, None)]
    if not any(values):
        return None
    for name, value in zip(names, values):
        if not value or not _Z85_KEY.fullmatch(value):
            raise SystemExit(f"memlane-worker: {name} must be a 40-character Z85 CURVE key "
                             f"(all of {', '.join(names)} or none), got {len(value or '')} characters")
    return CurveKeys(server=values[0], public=values[1], secret=values[2])


def rank_key(stage_key: bytes, rank: int) -> bytes:
    """The key rank `rank` of a distributed stage proves (rankKey() in src/transport/auth.ts):
    every rank gets the stage key from the launcher's environment, each claims only its slot."""
    return hmac.new(stage_key, f"{RANK_KEY_PREFIX}{rank}".encode(), hashlib.sha256).digest()


def hello_auth(key: bytes | None, id_: str, pid: int) -> str | None:
    """hello.auth for this id and pid; None without a key (the orchestrator then refuses us)."""
    if key is None:
        return None
    return hmac.new(key, f"{HELLO_AUTH_PREFIX}{id_}\n{pid}".encode(), hashlib.sha256).hexdigest()


def max_message_bytes() -> int:
    """The run's limit (ENV_MAX_MESSAGE_BYTES), else the protocol default."""
    text = os.environ.get(ENV_MAX_MESSAGE_BYTES)
    if not text:
        return DEFAULT_MAX_MESSAGE_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1024:
        raise SystemExit(f"memlane-worker: {ENV_MAX_MESSAGE_BYTES} must be an integer >= 1024, got {text!r}")
    return value


def _wipe_original(name: str) -> None:
    """Overwrites the value of `name` in the C environment block with 'x' (os.environ holds its
    own copy, read at start-up). Best effort: without libc's getenv nothing is wiped."""
    try:
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_void_p
        getenv.argtypes = [ctypes.c_char_p]
        address = getenv(name.encode())
        if address:
            ctypes.memset(address, ord("x"), len(ctypes.string_at(address)))
    except (OSError, AttributeError):
        pass
