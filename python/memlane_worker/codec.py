"""TensorRef <-> numpy: tensors travel as raw little-endian C-contiguous frames after the
envelope (or in a shared-memory segment); the envelope only names dtype, shape and where.

Decoding makes zero-copy views on the received frames when the frame's address suits the
dtype's alignment; otherwise it copies once (numpy and torch are slow or refuse on
misaligned data).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import shm
from .errors import MalformedMessage
from .protocol import DTYPE_BYTES

# Protocol dtype name -> numpy dtype, always little-endian on the wire.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "int64": np.dtype("<i8"),
    "int32": np.dtype("<i4"),
    "uint8": np.dtype("u1"),
    "bool": np.dtype("?"),
}
assert set(NUMPY_DTYPES) == set(DTYPE_BYTES), "codec dtypes out of step with protocol.py"


def _dtype_name(arr: np.ndarray) -> str:
    for name, dt in NUMPY_DTYPES.items():
        if arr.dtype.kind == dt.kind and arr.dtype.itemsize == dt.itemsize:
            return name
    raise TypeError(f"dtype {arr.dtype} has no protocol name (allowed: {', '.join(NUMPY_DTYPES)})")


def encode(tensors: dict[str, np.ndarray]) -> tuple[list[dict[str, Any]], list[memoryview]]:
    """(TensorRef list, frames): frame i holds the i-th tensor's bytes."""
    refs: list[dict[str, Any]] = []
    frames: list[memoryview] = []
    for name, arr in tensors.items():
        dtype = _dtype_name(arr)
        # np.require, not ascontiguousarray: the latter turns 0-d arrays into 1-d.
        wire = np.require(arr, dtype=NUMPY_DTYPES[dtype], requirements="C")  # no copy when already right
        refs.append({"name": name, "dtype": dtype, "shape": list(wire.shape), "frame": len(frames)})
        frames.append(memoryview(wire.reshape(-1).view(np.uint8)))  # flat bytes; works for 0-d and empty
    return refs, frames


def _buffer(frame: Any) -> memoryview:
    # zmq.Frame (copy=False receive) exposes .buffer; bytes/memoryview work as they are.
    buf = getattr(frame, "buffer", frame)
    return memoryview(buf).cast("B")


def _check_ref(ref: Any, where: str) -> tuple[str, np.dtype, tuple[int, ...]]:
    if not isinstance(ref, dict):
        raise MalformedMessage(f"{where}: a TensorRef must be a map, got {type(ref).__name__}")
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedMessage(f"{where}: TensorRef.name must be a non-empty string, got {name!r}")
    dtype = ref.get("dtype")
    if dtype not in NUMPY_DTYPES:
        raise MalformedMessage(
            f"{where} ({name}): dtype must be one of {', '.join(NUMPY_DTYPES)}, got {dtype!r}",
            {"tensor": name, "dtype": repr(dtype)},
        )
    shape = ref.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise MalformedMessage(f"{where} ({name}): shape must be a list of non-negative integers, got {shape!r}")
    return name, NUMPY_DTYPES[dtype], tuple(shape)


def decode(refs: Any, frames: Sequence[Any]) -> dict[str, np.ndarray]:
    """name -> read-only array for every TensorRef; raises MalformedMessage naming the ref."""
    if refs is None:
        return {}
    if not isinstance(refs, list):
        raise MalformedMessage(f"tensors must be a list of TensorRef, got {type(refs).__name__}")
    out: dict[str, np.ndarray] = {}
    for i, ref in enumerate(refs):
        where = f"tensors[{i}]"
        name, dtype, shape = _check_ref(ref, where)
        expected = math.prod(shape) * dtype.itemsize
        if ref.get("shm") is not None:
            buf = shm.map_range(ref["shm"], where=f"{where} ({name})")
        else:
            index = ref.get("frame")
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(frames):
                raise MalformedMessage(
                    f"{where} ({name}): frame {index!r} does not exist; the message has {len(frames)} frame(s) after the envelope",
                    {"tensor": name, "frame": repr(index), "frames": len(frames)},
                )
            buf = _buffer(frames[index])
        if len(buf) != expected:
            raise MalformedMessage(
                f"{where} ({name}): dtype {ref['dtype']} shape {list(shape)} needs {expected} bytes, the data has {len(buf)}",
                {"tensor": name, "expectedBytes": expected, "foundBytes": len(buf)},
            )
        arr = np.frombuffer(buf, dtype=dtype).reshape(shape)
        if not arr.flags.aligned:
            arr = arr.copy()
        arr.flags.writeable = False  # the frame is shared; tasks copy if they must write
        out[name] = arr
    return out
