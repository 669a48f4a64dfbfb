"""Atomic file writes: a temp file in the destination's directory, then os.replace.

A reader (the orchestrator, the compiler, another worker) never sees a half-written
checkpoint or model, and a crash leaves at most a stray temp file, never a torn target.
The temp file lives in the same directory because os.replace is only atomic within one
file system.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yields a temp path next to `path`; on success it replaces `path`, on failure it is removed."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: str, data: bytes | memoryview) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def _fsync(path: str) -> None:
    # Durable before the rename, so a power cut cannot leave a renamed but empty file.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
