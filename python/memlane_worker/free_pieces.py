"""Which blocks the calling thread's malloc arena can hand out from memory it already holds
(docs/memory.md, "What the arena takes from held memory").

After ORT's load, glibc keeps most of what the load freed (malloc_stats). Later requests of the
thread are served from those free chunks before the heap grows or a block is mmapped (the mmap
threshold only decides how the heap grows): ORT's first arena regions of 4 MiB and the handle
tables of every region land in memory that is already resident and cost no RSS. How much fits
depends on the sizes of the free chunks, which no malloc API reports (malloc_info's large bins
span megabytes), so this asks malloc itself: in a forked child (the parent's heap is left as it
was), it takes blocks of 32 MiB, 16 MiB, ... 32 KiB, as many of each as come from resident
pages (mincore: at least 7/8 of the block's pages), and reports how many of each size it got.
A block from a grown heap or a fresh mmap is not resident, which ends that size. ORT's regions
are powers of two from 1 MiB and their tables a 32nd of them, so these sizes are the ones that
matter.

The child must run on the thread whose arena is measured: fork() copies the calling thread
only, with its arena. It reads residency instead of writing the blocks, so the parent's held
pages are not copied (a write would copy each one: a second copy of the held memory while the
child runs). It allocates nothing through malloc but the blocks it counts (the counts and the
residency vector are made at import). Python's own after-fork work in the child mallocs
a little (tens of KiB), which may come out of a held block: a block only just larger than a
size may then count as the next size down.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Optional

from . import malloc_stats

#: Block sizes tried, largest first (32 MiB: glibc's largest dynamic mmap threshold).
SIZES = tuple(1 << k for k in range(25, 14, -1))
_PAGE = os.sysconf("SC_PAGE_SIZE")
# Made at import, not between a load and the fork: a new ctypes type or buffer is a malloc'd
# object, which may split a held block.
_Counts = ctypes.c_uint32 * len(SIZES)
_COUNTS = _Counts()
_RESIDENCY = (ctypes.c_ubyte * (SIZES[0] // _PAGE + 2))()  # one byte a page of the largest block


def _load_libc() -> Optional[ctypes.CDLL]:
    if not malloc_stats.available():
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.mincore.restype = ctypes.c_int
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    return libc


# Loaded at import, not when asked: find_library and dlopen malloc, and anything malloc'd
# between the load and the fork may split a held block before the child sees it.
_LIBC = _load_libc()


def _resident(libc: ctypes.CDLL, p: int, size: int, vec: ctypes.Array) -> bool:
    """Whether at least 7/8 of the pages under [p, p + size) are resident."""
    first = p - p % _PAGE
    pages = (p + size - first + _PAGE - 1) // _PAGE
    if libc.mincore(first, pages * _PAGE, vec) != 0:
        return False
    return sum(vec[i] & 1 for i in range(pages)) * 8 >= pages * 7


def _carve(libc: ctypes.CDLL, counts: ctypes.Array, vec: ctypes.Array) -> None:
    for i, size in enumerate(SIZES):
        while True:
            p = libc.malloc(size)
            if not p or not _resident(libc, p, size, vec):
                break
            counts[i] += 1


def free_pieces() -> Optional[list[list[int]]]:
    """[[sizeKiB, count], ...] for the sizes the arena gave from held memory (largest first);
    None where glibc's malloc is not the process's (malloc_stats.available) or fork fails."""
    libc = _LIBC
    if libc is None:
        return None
    counts, vec = _COUNTS, _RESIDENCY
    ctypes.memset(counts, 0, ctypes.sizeof(counts))
    rfd, wfd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return None
    if pid == 0:  # the child: carve, send the counts' bytes, leave without cleanup
        code = 1
        try:
            os.close(rfd)
            _carve(libc, counts, vec)
            os.write(wfd, bytes(counts))
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    data = b""
    while chunk := os.read(rfd, 4096):
        data += chunk
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or len(data) != ctypes.sizeof(counts):
        raise RuntimeError(f"free_pieces: the carving child failed (wait status {status}, {len(data)} bytes of counts)")
    got = _Counts.from_buffer_copy(data)
    return [[size // 1024, int(n)] for size, n in zip(SIZES, got) if n > 0]
