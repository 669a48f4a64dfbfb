"""The receiver's mapping cache (python/memlane_worker/shm.py): a segment sent again is
mapped once; a segment replaced under its name, or unlinked, is never read through a stale
mapping."""
import os

import numpy as np
import pytest

from memlane_worker import codec, shm
from memlane_worker.errors import TaskError
from memlane_worker.protocol import ErrorCode


def _segment(name: str, data: np.ndarray) -> None:
    fd = os.open(os.path.join(shm.SHM_DIR, name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data.tobytes())
    finally:
        os.close(fd)


def _ref(name: str, n: int) -> list:
    return [{"name": "x", "dtype": "float32", "shape": [n], "shm": {"segment": name, "offset": 0, "length": 4 * n}}]


def _base(arr: np.ndarray):
    b = arr
    while not isinstance(b, memoryview):
        b = b.base
    return b.obj  # the mmap


@pytest.fixture
def name():
    n = f"memlane-test-cache-{os.getpid()}"
    shm._cache.clear()
    yield n
    shm._cache.clear()
    try:
        os.unlink(os.path.join(shm.SHM_DIR, n))
    except FileNotFoundError:
        pass


def test_same_segment_twice_is_one_mapping(name):
    data = np.arange(1024, dtype=np.float32)
    _segment(name, data)
    a = codec.decode(_ref(name, 1024), [])["x"]
    b = codec.decode(_ref(name, 1024), [])["x"]
    assert np.array_equal(a, data) and np.array_equal(b, data)
    assert _base(a) is _base(b)
    assert shm.cached_segments() == [name]


def test_replaced_segment_gets_a_new_mapping(name):
    _segment(name, np.zeros(1024, dtype=np.float32))
    a = codec.decode(_ref(name, 1024), [])["x"]
    os.unlink(os.path.join(shm.SHM_DIR, name))
    _segment(name, np.full(1024, 7, dtype=np.float32))  # same name and size, another file
    b = codec.decode(_ref(name, 1024), [])["x"]
    assert _base(a) is not _base(b)
    assert (b == 7).all() and (a == 0).all()  # the old view still reads the old segment


def test_unlinked_segment_is_unavailable_and_forgotten(name):
    _segment(name, np.ones(16, dtype=np.float32))
    codec.decode(_ref(name, 16), [])
    os.unlink(os.path.join(shm.SHM_DIR, name))
    with pytest.raises(TaskError) as e:
        codec.decode(_ref(name, 16), [])
    assert e.value.code == ErrorCode.SHM_UNAVAILABLE
    assert shm.cached_segments() == []


def test_unlinked_segments_are_dropped_by_the_next_lookup(name):
    other = name + "-b"
    try:
        _segment(name, np.ones(16, dtype=np.float32))
        _segment(other, np.ones(16, dtype=np.float32))
        codec.decode(_ref(name, 16), [])
        os.unlink(os.path.join(shm.SHM_DIR, name))  # the orchestrator is done with it
        codec.decode(_ref(other, 16), [])
        assert shm.cached_segments() == [other]  # its pages are not kept alive by us
        assert shm.release_unlinked() == 0
    finally:
        os.unlink(os.path.join(shm.SHM_DIR, other))


def test_cache_is_bounded(name):
    names = [f"{name}-{i}" for i in range(shm.CACHE_ENTRIES + 2)]
    try:
        for n in names:
            _segment(n, np.ones(16, dtype=np.float32))
            codec.decode(_ref(n, 16), [])
        assert shm.cached_segments() == names[-shm.CACHE_ENTRIES:]
    finally:
        for n in names:
            os.unlink(os.path.join(shm.SHM_DIR, n))
