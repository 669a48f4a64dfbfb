"""TensorRef <-> numpy round trips, zero-copy views, shared memory and bad refs."""
from __future__ import annotations

import os
from multiprocessing import shared_memory

import numpy as np
import pytest

from memlane_worker import codec
from memlane_worker.errors import MalformedMessage, TaskError
from memlane_worker.protocol import ErrorCode

SAMPLES = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5,
    "f16": np.array([[1.5, -2.0]], dtype=np.float16),
    "i64": np.array([1, -2, 2**62], dtype=np.int64),
    "i32": np.array([[7], [-8]], dtype=np.int32),
    "u8": np.arange(5, dtype=np.uint8),
    "b": np.array([True, False, True]),
    "scalar": np.array(3.0, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
}


def test_round_trip_every_dtype():
    refs, frames = codec.encode(SAMPLES)
    assert [r["frame"] for r in refs] == list(range(len(SAMPLES)))
    got = codec.decode(refs, [bytes(f) for f in frames])
    for name, arr in SAMPLES.items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape
        assert np.array_equal(got[name], arr)


def test_encode_makes_contiguous_little_endian():
    big = np.arange(6, dtype=">f4").reshape(2, 3).T  # big-endian and not contiguous
    refs, frames = codec.encode({"x": big})
    assert refs[0]["dtype"] == "float32" and refs[0]["shape"] == [3, 2]
    assert np.array_equal(np.frombuffer(bytes(frames[0]), "<f4").reshape(3, 2), big)


def test_decode_is_zero_copy_on_aligned_frames():
    frame = np.arange(8, dtype=np.float64).view(np.uint8)  # 8-aligned buffer
    ref = {"name": "x", "dtype": "int64", "shape": [8], "frame": 0}
    arr = codec.decode([ref], [memoryview(frame)])["x"]
    assert np.shares_memory(arr, frame) and not arr.flags.writeable


def test_decode_copies_misaligned_frames():
    raw = np.zeros(8 * 4 + 1, dtype=np.uint8)
    view = memoryview(raw)[1:]  # address 1 past an aligned one
    arr = codec.decode([{"name": "x", "dtype": "int64", "shape": [4], "frame": 0}], [view])["x"]
    assert arr.flags.aligned and not np.shares_memory(arr, raw)


@pytest.mark.parametrize("ref, frames, words", [
    ({"name": "x", "dtype": "float32", "shape": [2], "frame": 1}, [b"\0" * 8], "frame 1 does not exist"),
    ({"name": "x", "dtype": "float32", "shape": [3], "frame": 0}, [b"\0" * 8], "needs 12 bytes, the data has 8"),
    ({"name": "x", "dtype": "float64", "shape": [1], "frame": 0}, [b"\0" * 8], "dtype must be one of"),
    ({"name": "x", "dtype": "float32", "shape": [-1], "frame": 0}, [b""], "shape must be"),
    ({"dtype": "float32", "shape": [1], "frame": 0}, [b"\0" * 4], "name must be"),
    ("x", [], "must be a map"),
])
def test_bad_refs_name_what_is_wrong(ref, frames, words):
    with pytest.raises(MalformedMessage, match=words) as e:
        codec.decode([ref], frames)
    assert e.value.code == ErrorCode.MALFORMED_MESSAGE


def test_shm_segment_is_mapped():
    data = np.arange(10, dtype=np.float32)
    seg = shared_memory.SharedMemory(create=True, size=64 + data.nbytes)
    try:
        seg.buf[64:64 + data.nbytes] = data.tobytes()
        ref = {"name": "x", "dtype": "float32", "shape": [2, 5], "shm": {"segment": seg.name, "offset": 64, "length": 40}}
        arr = codec.decode([ref], [])["x"]
        assert np.array_equal(arr, data.reshape(2, 5))
        seg.buf[64:68] = np.float32(42).tobytes()  # a view, not a copy
        assert arr[0, 0] == 42
        del arr
    finally:
        seg.close()
        seg.unlink()


def test_shm_errors():
    with pytest.raises(TaskError) as e:
        codec.decode([{"name": "x", "dtype": "uint8", "shape": [1],
                       "shm": {"segment": f"memlane-missing-{os.getpid()}", "offset": 0, "length": 1}}], [])
    assert e.value.code == ErrorCode.SHM_UNAVAILABLE
    with pytest.raises(MalformedMessage, match="plain segment name"):
        codec.decode([{"name": "x", "dtype": "uint8", "shape": [1],
                       "shm": {"segment": "../etc/passwd", "offset": 0, "length": 1}}], [])
    seg = shared_memory.SharedMemory(create=True, size=16)
    try:
        with pytest.raises(MalformedMessage, match="outside segment"):
            codec.decode([{"name": "x", "dtype": "uint8", "shape": [16],
                           "shm": {"segment": seg.name, "offset": 8, "length": 16}}], [])
    finally:
        seg.close()
        seg.unlink()
