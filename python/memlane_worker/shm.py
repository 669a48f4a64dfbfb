"""TensorRefs that point into POSIX shared memory (/dev/shm/<segment>) instead of a frame.

Same host only: the orchestrator writes a large eval set once and every worker maps it
instead of receiving a copy over the socket. The segment is mapped read-only; the array
views keep the mapping alive for as long as they live.

Mappings are cached by segment name and kept while the segment under that name is the same
file (device, inode, size): a segment sent to this worker again (an eval set sent with every
task) is mapped once, so its pages are faulted into this process once instead of on every
task; a fresh mapping's page faults cost about as much as copying the bytes
(bench/transport-shm.ts). The file is still opened on every use, so an unlinked segment is
SHM_UNAVAILABLE exactly as without the cache, and a segment replaced under the same name gets
a new mapping. A cached mapping keeps its segment's pages alive after the orchestrator
unlinks it: every lookup drops the entries whose name is gone or names another file, and at
most CACHE_ENTRIES mappings are kept (least recently used dropped first); release_unlinked()
drops them on demand (e.g. when a task ends).
"""
from __future__ import annotations

import mmap
import os
import re
from collections import OrderedDict
from typing import Any, NamedTuple

from .errors import MalformedMessage, TaskError
from .protocol import ErrorCode

SHM_DIR = "/dev/shm"
# Said in hello.capabilities: this worker reads `shm` TensorRefs (docs/protocol.md).
CAPABILITY = "shm"
# A POSIX shm name without the leading slash: no path separators, no "..".
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,250}$")
# Most segments a worker keeps mapped between tasks (a task's inputs share one segment).
CACHE_ENTRIES = 4
# No madvise on a new mapping: MADV_POPULATE_READ (Linux 5.14+) and MADV_WILLNEED measured
# within 5% of plain faults while reading (64 MiB map + uint32 sum + unmap: 16.1 / 16.2 vs
# 16.8 ms), and they would fault in ranges a task may never read. Caching is what pays.


class _Mapped(NamedTuple):
    dev: int
    ino: int
    size: int
    mapping: mmap.mmap


_cache: OrderedDict[str, _Mapped] = OrderedDict()


def _int(spec: dict[str, Any], key: str, where: str) -> int:
    value = spec.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedMessage(f"{where}: shm.{key} must be a non-negative integer, got {value!r}")
    return value


def _same_file(entry: _Mapped, st: os.stat_result) -> bool:
    return (entry.dev, entry.ino, entry.size) == (st.st_dev, st.st_ino, st.st_size)


def release_unlinked(keep: str | None = None) -> int:
    """Drops cached mappings whose segment is unlinked or replaced; returns how many.

    Arrays still viewing a dropped mapping keep it alive until they are released themselves.
    """
    dropped = 0
    for name, entry in list(_cache.items()):
        if name == keep:
            continue
        try:
            gone = not _same_file(entry, os.stat(os.path.join(SHM_DIR, name)))
        except OSError:
            gone = True
        if gone:
            del _cache[name]
            dropped += 1
    return dropped


def cached_segments() -> list[str]:
    """Names of the segments mapped in the cache, least recently used first (for tests)."""
    return list(_cache)


def _mapping(segment: str, fd: int, st: os.stat_result) -> mmap.mmap:
    entry = _cache.get(segment)
    if entry is not None and _same_file(entry, st):
        _cache.move_to_end(segment)
        return entry.mapping
    mapping = mmap.mmap(fd, st.st_size, prot=mmap.PROT_READ)
    _cache[segment] = _Mapped(st.st_dev, st.st_ino, st.st_size, mapping)
    _cache.move_to_end(segment)
    while len(_cache) > CACHE_ENTRIES:
        _cache.popitem(last=False)
    return mapping


def map_range(spec: Any, where: str) -> memoryview:
    """A read-only view of bytes [offset, offset+length) of /dev/shm/<segment>."""
    if not isinstance(spec, dict):
        raise MalformedMessage(f"{where}: shm must be a map {{segment, offset, length}}, got {type(spec).__name__}")
    segment = spec.get("segment")
    if not isinstance(segment, str) or not _NAME.match(segment.lstrip("/")) or segment.lstrip("/") in (".", ".."):
        raise MalformedMessage(f"{where}: shm.segment must be a plain segment name, got {segment!r}")
    segment = segment.lstrip("/")
    offset, length = _int(spec, "offset", where), _int(spec, "length", where)
    path = os.path.join(SHM_DIR, segment)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        _cache.pop(segment, None)
        raise TaskError(
            ErrorCode.SHM_UNAVAILABLE, f"{where}: cannot open shared memory segment {path}: {e.strerror}",
            {"segment": segment, "errno": e.errno},
        ) from None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if offset + length > size:
            raise MalformedMessage(
                f"{where}: shm range [{offset}, {offset + length}) lies outside segment {segment} of {size} bytes",
                {"segment": segment, "offset": offset, "length": length, "segmentBytes": size},
            )
        if length == 0:
            return memoryview(b"")
        mapping = _mapping(segment, fd, st)
    finally:
        os.close(fd)  # the mapping stays valid without the descriptor
    if len(_cache) > 1:
        release_unlinked(keep=segment)
    return memoryview(mapping)[offset : offset + length]


def is_mapped(arr: Any) -> bool:
    """True when `arr` is a view of a shared-memory mapping (it came as an `shm` ref)."""
    base = arr
    while getattr(base, "base", None) is not None and not isinstance(base, memoryview):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
