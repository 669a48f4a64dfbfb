"""Component versions for `hello`, read from installed package metadata.

importlib.metadata reads dist-info files only: it never imports torch or onnxruntime,
so announcing their versions costs no memory in a worker that may never use them.
"""
from __future__ import annotations

import platform
from importlib import metadata

from .protocol import PROTOCOL_VERSION

# hello key -> distribution name
_DISTRIBUTIONS = {
    "memlane-worker": "memlane-worker",
    "torch": "torch",
    "onnx": "onnx",
    "onnxscript": "onnxscript",
    "onnxruntime": "onnxruntime",
    "numpy": "numpy",
    "pyzmq": "pyzmq",
    "msgpack": "msgpack",
    "safetensors": "safetensors",
    "scikit-learn": "scikit-learn",
}


def collect() -> dict[str, str]:
    out = {"python": platform.python_version(), "protocol": str(PROTOCOL_VERSION)}
    for key, dist in _DISTRIBUTIONS.items():
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    if "onnxruntime" not in out:  # the GPU build is a different distribution
        try:
            out["onnxruntime"] = metadata.version("onnxruntime-gpu")
        except metadata.PackageNotFoundError:
            pass
    return out
