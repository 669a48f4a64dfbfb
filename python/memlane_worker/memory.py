"""The worker's own memory reading, from /proc/self (see docs/protocol.md, MemoryReading).

Deliberately imports nothing heavy: GPU figures are added only when torch is already
loaded and CUDA initialised, so reading memory never pulls torch into an ORT-only worker.
"""
from __future__ import annotations

import sys
from typing import Any

_ROLLUP = "/proc/self/smaps_rollup"
_STATUS = "/proc/self/status"


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
    """{rssKiB, pssKiB, ussKiB, swapKiB, hwmKiB} plus GPU figures where CUDA is live."""
    r = _kib_fields(_ROLLUP, {"Rss", "Pss", "Private_Clean", "Private_Dirty", "Swap"})
    s = _kib_fields(_STATUS, {"VmHWM"})
    reading: dict[str, Any] = {
        "rssKiB": r["Rss"],
        "pssKiB": r["Pss"],
        "ussKiB": r["Private_Clean"] + r["Private_Dirty"],
        "swapKiB": r.get("Swap", 0),
        "hwmKiB": s["VmHWM"],
    }
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
