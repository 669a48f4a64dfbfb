"""What glibc's malloc holds of freed memory, from mallinfo2() (docs/memory.md, "Held by malloc").

Freed blocks that malloc keeps for reuse stay mapped and, once touched, resident: RSS does not
drop when a runtime frees them. ORT's model load is the case that made this worth a figure: it
frees its load-time copies of the weights, and glibc keeps most of them (its dynamic mmap
threshold has risen past their size, so they came from the heap, not from their own mmap).

mallinfo2() (glibc >= 2.33) sums every arena: `fordblks` is the bytes in free chunks, the top
chunk included; `uordblks` + `hblkhd` the bytes handed out (heap chunks, mmapped blocks). Where
the C library has no mallinfo2 (musl, an older glibc), or the process's malloc is not glibc's
(a preloaded jemalloc or tcmalloc), the figures are absent, never 0.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Optional


class _Mallinfo2(ctypes.Structure):
    # struct mallinfo2 in <malloc.h>: ten size_t fields, in this order.
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _address(fn) -> Optional[int]:
    return ctypes.cast(fn, ctypes.c_void_p).value


def _load() -> Optional[ctypes._CFuncPtr]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
        # The process's malloc must be glibc's: under a preloaded jemalloc, tcmalloc or mimalloc
        # (LD_PRELOAD, a common choice under ORT and PyTorch) mallinfo2 reads glibc's idle
        # arenas and returns zeros that look measured.
        if _address(ctypes.CDLL(None).malloc) != _address(libc.malloc):
            return None
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2
    fn.argtypes = []
    return fn


_MALLINFO2 = _load()


def available() -> bool:
    return _MALLINFO2 is not None


def read() -> dict[str, int]:
    """{mallocFreeKiB, mallocInUseKiB} (KiB), or {} where mallinfo2 does not exist.

    mallocFreeKiB is an upper bound on the freed memory malloc keeps resident: it counts the top
    chunk's tail that was never touched too (at most the trim threshold, 128 KiB by default).
    """
    if _MALLINFO2 is None:
        return {}
    m = _MALLINFO2()
    return {"mallocFreeKiB": m.fordblks // 1024, "mallocInUseKiB": (m.uordblks + m.hblkhd) // 1024}
