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


def _sum(summary: dict[str, list[int]], i: int) -> int:
    return sum(c[i] for c in summary.values())


def test_smaps_summary_shows_a_mapped_file_and_anonymous_memory_and_sums_to_the_rollup(tmp_path):
    import mmap

    path = tmp_path / "weights.onnx"
    path.write_bytes(bytes(range(256)) * (16 * 4096))  # 16 MiB
    before = memory.smaps_summary()
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    touched = sum(mapped[i] for i in range(0, len(mapped), 4096))  # every page resident
    # Private: a shared anonymous mapping would show as "/dev/zero (deleted)" instead.
    anon = mmap.mmap(-1, 24 * 1024 * 1024, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    anon.write(b"\x01" * len(anon))  # every page written: anonymous, private dirty
    after = memory.smaps_summary()
    rollup = memory.read()
    try:
        assert touched >= 0
        assert str(path) not in before
        rss, _pss, _clean, _dirty, anonymous, _swap = after[str(path)]
        assert abs(rss - 16 * MiB_KiB) <= 0.02 * 16 * MiB_KiB, after[str(path)]
        # File pages, not anonymous ones (they may count as private *dirty*: the file was
        # just written and its page-cache pages are not yet on disk).
        assert anonymous == 0
        grew = after[memory.ANON][0] - before.get(memory.ANON, [0])[0]
        assert abs(grew - 24 * MiB_KiB) <= 0.04 * 24 * MiB_KiB, grew  # plus what Python allocated meanwhile
        # The kinds of one reading add up to the rollup read right after, within 1 %.
        assert abs(_sum(after, 0) - rollup["rssKiB"]) <= 0.01 * rollup["rssKiB"]
        assert abs(_sum(after, 1) - rollup["pssKiB"]) <= 0.01 * rollup["pssKiB"]
        assert abs(_sum(after, 2) + _sum(after, 3) - rollup["ussKiB"]) <= 0.01 * rollup["ussKiB"]
        assert all(len(c) == len(memory.SMAPS_FIELDS) and min(c) >= 0 for c in after.values())
    finally:
        mapped.close()
        anon.close()


def test_file_mappings_names_the_files_beside_a_model_with_offset_size_and_resident_bytes(tmp_path):
    import mmap

    data = tmp_path / "m.onnx.data"
    data.write_bytes(b"\1" * (3 * 65536))
    (tmp_path / "m.onnx").write_bytes(b"\0" * 4096)
    with open(data, "rb") as fd, open(tmp_path / "m.onnx", "rb") as fm:
        part = mmap.mmap(fd.fileno(), 65536, prot=mmap.PROT_READ, offset=65536)
        model = mmap.mmap(fm.fileno(), 4096, prot=mmap.PROT_READ)
        try:
            assert memory.file_mappings(str(tmp_path), str(tmp_path / "m.onnx")) == [["m.onnx.data", 65536, 65536, 0]]
            part[0:1]  # a read faults a page (or the kernel's window about it) in
            [(name, offset, size, resident)] = memory.file_mappings(str(tmp_path), str(tmp_path / "m.onnx"))
            assert (name, offset, size) == ("m.onnx.data", 65536, 65536)
            assert 4096 <= resident <= 65536
            model.close()  # the model file itself was never listed
        finally:
            part.close()


def test_fault_window_is_what_one_read_of_a_file_page_maps(tmp_path):
    data = tmp_path / "table.bin"
    data.write_bytes(b"\1" * (8 << 20))
    w = memory.fault_window(str(data), 4096, (8 << 20) - 4096)
    # At least a page, at most a large folio (2 MiB), whatever the page cache holds of the file.
    assert w is not None and 4096 <= w <= 2 << 20
    # A range of one page maps that page: nothing beyond the mapping counts.
    assert memory.fault_window(str(data), 8192, 4096) == 4096
    assert memory.fault_window(str(data), 0, 0) is None
