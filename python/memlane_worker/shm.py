"""TensorRefs that point into POSIX shared memory (/dev/shm/<segment>) instead of a frame.

Same host only: the orchestrator writes a large eval set once and every worker maps it
instead of receiving a copy over the socket. The segment is mapped read-only; the array
views keep the mapping alive for as long as they live.
"""
from __future__ import annotations

import mmap
import os
import re
from typing import Any

from .errors import MalformedMessage, TaskError
from .protocol import ErrorCode

SHM_DIR = "/dev/shm"
# Said in hello.capabilities: this worker reads `shm` TensorRefs (docs/protocol.md).
CAPABILITY = "shm"
# A POSIX shm name without the leading slash: no path separators, no "..".
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,250}$")


def _int(spec: dict[str, Any], key: str, where: str) -> int:
    value = spec.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedMessage(f"{where}: shm.{key} must be a non-negative integer, got {value!r}")
    return value


def map_range(spec: Any, where: str) -> memoryview:
    """A read-only view of bytes [offset, offset+length) of /dev/shm/<segment>."""
    if not isinstance(spec, dict):
        raise MalformedMessage(f"{where}: shm must be a map {{segment, offset, length}}, got {type(spec).__name__}")
    segment = spec.get("segment")
    if not isinstance(segment, str) or not _NAME.match(segment.lstrip("/")) or segment.lstrip("/") in (".", ".."):
        raise MalformedMessage(f"{where}: shm.segment must be a plain segment name, got {segment!r}")
    offset, length = _int(spec, "offset", where), _int(spec, "length", where)
    path = os.path.join(SHM_DIR, segment.lstrip("/"))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise TaskError(
            ErrorCode.SHM_UNAVAILABLE, f"{where}: cannot open shared memory segment {path}: {e.strerror}",
            {"segment": segment, "errno": e.errno},
        ) from None
    try:
        size = os.fstat(fd).st_size
        if offset + length > size:
            raise MalformedMessage(
                f"{where}: shm range [{offset}, {offset + length}) lies outside segment {segment} of {size} bytes",
                {"segment": segment, "offset": offset, "length": length, "segmentBytes": size},
            )
        if length == 0:
            return memoryview(b"")
        mapping = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)  # the mapping stays valid without the descriptor
    return memoryview(mapping)[offset : offset + length]


def is_mapped(arr: Any) -> bool:
    """True when `arr` is a view of a shared-memory mapping (it came as an `shm` ref)."""
    base = arr
    while getattr(base, "base", None) is not None and not isinstance(base, memoryview):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
