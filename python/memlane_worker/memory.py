"""The worker's own memory reading, from /proc/self (see docs/protocol.md, MemoryReading),
and its per-mapping summary from /proc/self/smaps (docs/protocol.md, SmapsSummary).

Deliberately imports nothing heavy: GPU figures are added only when torch is already
loaded and CUDA initialised, so reading memory never pulls torch into an ORT-only worker.
"""
from __future__ import annotations

import sys
from typing import Any

from . import malloc_stats

_ROLLUP = "/proc/self/smaps_rollup"
_STATUS = "/proc/self/status"
_SMAPS = "/proc/self/smaps"


def _kib_fields(path: str, wanted: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(path, "rb") as f:
        for line in f:
            key, _, rest = line.partition(b":")
            name = key.decode()
            if name in wanted:
                out[name] = int(rest.split()[0])  # "   1234 kB"
    return out


def read() -> dict[str, Any]:
    """{rssKiB, pssKiB, ussKiB, swapKiB, hwmKiB}, glibc malloc's free and in-use bytes where
    mallinfo2 exists (malloc_stats), plus GPU figures where CUDA is live."""
    r = _kib_fields(_ROLLUP, {"Rss", "Pss", "Private_Clean", "Private_Dirty", "Swap"})
    s = _kib_fields(_STATUS, {"VmHWM"})
    reading: dict[str, Any] = {
        "rssKiB": r["Rss"],
        "pssKiB": r["Pss"],
        "ussKiB": r["Private_Clean"] + r["Private_Dirty"],
        "swapKiB": r.get("Swap", 0),
        "hwmKiB": s["VmHWM"],
    }
    reading.update(malloc_stats.read())
    reading.update(gpu_fields())
    return reading


def gpu_fields() -> dict[str, int]:
    """torch's CUDA allocator figures, only if this process already uses CUDA through torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    try:
        if not torch.cuda.is_initialized():
            return {}
        return {
            "gpuAllocatedKiB": torch.cuda.memory_allocated() // 1024,
            "gpuReservedKiB": torch.cuda.memory_reserved() // 1024,
        }
    except Exception:  # a broken driver must not break a phase mark
        return {}


def anon_kib() -> int:
    """This process's resident anonymous pages (RssAnon), KiB: what malloc's blocks cost in RSS,
    without the code pages a library maps as it loads. Memory malloc handed out or keeps free is
    anonymous, but only the pages ever written are resident (estimate.ortLoad: untouched)."""
    return _kib_fields(_STATUS, {"RssAnon"})["RssAnon"]


def reset_peak() -> bool:
    """Resets VmHWM to the current RSS so that the next reading's hwmKiB is this phase's peak.

    Writing "5" to clear_refs is Linux >= 4.0; some sandboxes forbid it. Then hwmKiB stays the
    process-lifetime peak, which is still an upper bound; we report whether the reset worked.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# -- per-mapping summary (smaps) ---------------------------------------------------------
# Order of the counters in each summary entry; the same in every language (docs/protocol.md).
SMAPS_FIELDS = (b"Rss", b"Pss", b"Private_Clean", b"Private_Dirty", b"Anonymous", b"Swap")
_FIELD_INDEX = {k: i for i, k in enumerate(SMAPS_FIELDS)}
# Pseudo-names of mappings without a path (docs/protocol.md, SmapsSummary): a writable one
# right above an inaccessible one of at most a few pages is laid out like a pthread stack over
# its guard page; a writable one that starts on a 64 MiB boundary and fills that 64 MiB
# (alone, or with an inaccessible rest) is laid out like a glibc malloc arena of a thread
# other than the main one; any other is plain anonymous memory.
ANON = "[anon]"
ANON_GUARDED = "[anon guarded]"
ANON_ARENA = "[anon arena]"
_GUARD_MAX = 64 * 1024  # a guard is a page or a few; a bigger inaccessible region is a reservation
_ARENA = 64 * 1024 * 1024  # glibc's HEAP_MAX_SIZE on 64-bit
_HEX = frozenset(b"0123456789abcdef")


def _anon_name(m: tuple, before: tuple | None, after: tuple | None) -> str:
    """Pseudo-name of a nameless mapping m = (lo, hi, perms, path) from its neighbours."""
    lo, hi, perms, _ = m
    if not perms.startswith(b"rw"):
        return ANON
    if (before is not None and not before[3] and before[2].startswith(b"---") and before[1] == lo
            and before[1] - before[0] <= _GUARD_MAX):
        return ANON_GUARDED
    if lo % _ARENA == 0 and (hi - lo == _ARENA or (
            after is not None and not after[3] and after[2].startswith(b"---") and after[0] == hi and after[1] == lo + _ARENA)):
        return ANON_ARENA
    return ANON


def smaps_summary(path: str = _SMAPS) -> dict[str, list[int]]:
    """{path or pseudo-name: [Rss, Pss, Private_Clean, Private_Dirty, Anonymous, Swap] KiB},
    summed over the mappings of that path. Classification is the orchestrator's job
    (src/memory/mapping-kinds.ts); this only reads, so that the reading is taken at the mark.
    """
    out: dict[str, list[int]] = {}
    # A mapping's name is settled when the next header is seen (a pseudo-name depends on both
    # neighbours): (lo, hi, perms, path) of the previous and current mapping, current counts.
    before: tuple | None = None
    current: tuple | None = None
    counts = [0, 0, 0, 0, 0, 0]

    def settle(after: tuple | None) -> None:
        name = current[3].decode("utf-8", "replace") if current[3] else _anon_name(current, before, after)
        into = out.get(name)
        if into is None:
            out[name] = counts
        else:
            for i, c in enumerate(counts):
                into[i] += c

    with open(path, "rb") as f:
        for line in f:
            if line[0] in _HEX:
                addr, perms, _off, _dev, _inode, *rest = line.split(None, 5)
                start, _, end = addr.partition(b"-")
                header = (int(start, 16), int(end, 16), perms, rest[0].rstrip(b"\n") if rest else b"")
                if current is not None:
                    settle(header)
                before, current, counts = current, header, [0, 0, 0, 0, 0, 0]
                continue
            key, _, rest = line.partition(b":")
            i = _FIELD_INDEX.get(key)
            if i is not None and current is not None:
                counts[i] += int(rest.split()[0])
    if current is not None:
        settle(None)
    return out


def _mapped_files(path: str = _SMAPS) -> list[tuple[bytes, int, int, int]]:
    """(file path, file offset, size, resident bytes) of each of this process's file mappings."""
    out: list[tuple[bytes, int, int, int]] = []
    current: list | None = None
    with open(path, "rb") as f:
        for line in f:
            if line[0] in _HEX:
                if current is not None:
                    out.append(tuple(current))
                addr, _perms, off, _dev, _inode, *rest = line.split(None, 5)
                name = rest[0].strip() if rest else b""
                lo, _, hi = addr.partition(b"-")
                current = [name, int(off, 16), int(hi, 16) - int(lo, 16), 0] if name.startswith(b"/") else None
            elif current is not None and line.startswith(b"Rss:"):
                current[3] = int(line.split()[1]) * 1024
    if current is not None:
        out.append(tuple(current))
    return out


def file_mappings(directory: str, skip: str, path: str = _SMAPS) -> list[list]:
    """[[file name, file offset, size, resident], ...] in bytes: this process's mappings of the
    files in `directory` other than `skip`. ONNX Runtime maps a model's external data file and
    keeps the initializers it does not pre-pack there, read in place (estimate.ortLoad; the
    estimate's mapped-weight term, src/estimate/ort-mapped.ts)."""
    import os
    prefix = os.path.realpath(directory).encode() + b"/"
    skip_b = os.path.realpath(skip).encode()
    return [[os.path.basename(name).decode("utf-8", "replace"), off, size, rss]
            for name, off, size, rss in _mapped_files(path) if name.startswith(prefix) and name != skip_b]


def fault_window(path: str, offset: int, length: int, touches: int = 8) -> int | None:
    """Bytes the kernel maps for one read of a file's pages, measured: [offset, offset +
    length) of `path` mapped read-only, one byte read at `touches` points spread evenly over it,
    the mean growth of the mapping's resident bytes over the reads that grew it (a read inside
    a window an earlier one mapped adds nothing). A read fault maps what the page cache holds
    about the page (the kernel's fault-around window, 64 KiB by default, or a whole large folio
    of a file freshly written: up to 2 MiB), so a table read a row at a time becomes resident in
    steps of this (src/estimate/table-reads.ts). None where the range holds no page."""
    import mmap
    import os
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    size = offset + length - start
    if length <= 0 or size <= 0:
        return None
    real = os.path.realpath(path).encode()

    def resident() -> int | None:
        return next((rss for name, off, _size, rss in _mapped_files() if name == real and off == start), None)

    grown: list[int] = []
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ, offset=start)
        try:
            before = resident() or 0
            step = length / touches
            for k in range(touches):
                m[offset - start + int(step * k + step / 2)]
                now = resident()
                if now is None:
                    return None
                if now > before:
                    grown.append(now - before)
                before = now
        finally:
            m.close()
    return sum(grown) // len(grown) if grown else None
