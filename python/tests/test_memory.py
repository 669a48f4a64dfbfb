"""/proc/self readings: fields present, and a touched 64 MiB allocation shows in RSS/USS."""
from __future__ import annotations

import gc

import numpy as np

from memlane_worker import memory

MiB_KiB = 1024


def test_reading_has_every_field():
    r = memory.read()
    for key in ("rssKiB", "pssKiB", "ussKiB", "swapKiB", "hwmKiB"):
        assert isinstance(r[key], int) and r[key] >= 0, key
    assert r["ussKiB"] <= r["pssKiB"] <= r["rssKiB"] <= r["hwmKiB"]


def test_64_mib_shows_in_rss_and_uss_within_2_percent():
    gc.collect()
    before = memory.read()
    block = np.ones(64 * 1024 * 1024, dtype=np.uint8)  # ones: every page written, so resident
    after = memory.read()
    want = 64 * MiB_KiB
    for key in ("rssKiB", "ussKiB"):
        grew = after[key] - before[key]
        assert abs(grew - want) <= 0.02 * want, (key, grew)
    del block


def test_reset_peak_makes_hwm_a_phase_peak():
    block = np.ones(32 * 1024 * 1024, dtype=np.uint8)
    del block
    gc.collect()
    peak_with_block = memory.read()["hwmKiB"]
    if not memory.reset_peak():
        import pytest
        pytest.skip("this kernel refuses writes to /proc/self/clear_refs")
    after = memory.read()
    assert after["hwmKiB"] <= peak_with_block
    assert after["hwmKiB"] >= after["rssKiB"] - 1024  # reset to about the current RSS
