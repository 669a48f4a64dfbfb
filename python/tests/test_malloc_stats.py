"""mallinfo2 figures: freed heap blocks that malloc keeps show as mallocFreeKiB, and stay in RSS."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys

import pytest

from memlane_worker import malloc_stats, memory

if not malloc_stats.available():
    pytest.skip("mallinfo2 cannot be read here (a C library without it: glibc < 2.33 or not glibc; or a malloc that is not glibc's): the figures are absent", allow_module_level=True)

_libc = ctypes.CDLL("libc.so.6")
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]

BLOCK = 64 * 1024  # below glibc's smallest mmap threshold (128 KiB): always served from the heap
COUNT = 512        # 32 MiB


def test_reading_carries_malloc_figures():
    r = memory.read()
    assert isinstance(r["mallocFreeKiB"], int) and r["mallocFreeKiB"] >= 0
    assert isinstance(r["mallocInUseKiB"], int) and r["mallocInUseKiB"] > 0


def test_freed_heap_blocks_are_held_by_malloc_and_stay_resident():
    blocks = [_libc.malloc(BLOCK) for _ in range(COUNT)]
    pin = _libc.malloc(BLOCK)  # above them all: the freed blocks cannot merge into the top and be trimmed
    assert all(blocks) and pin
    for b in blocks:
        ctypes.memset(b, 1, BLOCK)  # touched: resident
    before = memory.read()
    for b in blocks:
        _libc.free(b)
    after = memory.read()
    want = COUNT * BLOCK // 1024
    try:
        assert after["mallocFreeKiB"] - before["mallocFreeKiB"] >= 0.95 * want
        assert before["mallocInUseKiB"] - after["mallocInUseKiB"] >= 0.95 * want
        assert before["rssKiB"] - after["rssKiB"] < 0.1 * want  # freed, but still resident
    finally:
        _libc.free(pin)


_BUMP_C = r"""
#include <stddef.h>
static char pool[1 << 26];
static size_t used;
void *malloc(size_t n) { size_t at = (used + 15) & ~(size_t)15; used = at + n; return used <= sizeof pool ? pool + at : 0; }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) { return malloc(a * b); }
void *realloc(void *p, size_t n) { char *q = malloc(n); if (p && q) { for (size_t i = 0; i < n; i++) q[i] = ((char *)p)[i]; } return q; }
"""


def test_another_malloc_preloaded_makes_the_figures_absent_not_zero(tmp_path):
    """A process whose malloc is not glibc's (LD_PRELOAD) has no mallinfo2 figures at all."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in allocator")
    src = tmp_path / "bump.c"
    src.write_text(_BUMP_C)
    lib = tmp_path / "libbump.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    code = "from memlane_worker import malloc_stats, memory; print(malloc_stats.available(), sorted(k for k in memory.read() if k.startswith('malloc')))"
    env = {**os.environ, "LD_PRELOAD": str(lib)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False []"
