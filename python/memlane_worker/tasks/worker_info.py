"""`worker.info`: what this worker process has loaded, for tests and diagnostics.

The point is to check claims like "an infer.ort worker never imports torch" against the
process itself rather than trusting the code's intent.
"""
from __future__ import annotations

import os
import sys

from .. import memory, shm


def _mapped_libraries() -> list[str]:
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and ".so" in parts[5]:
                libs.add(os.path.basename(parts[5].strip()))
    return sorted(libs)


def run(ctx):
    top_level = sorted({name.split(".")[0] for name in list(sys.modules)})
    return {
        "pid": os.getpid(),
        "modules": top_level,
        "torchImported": "torch" in sys.modules,
        "sharedLibraries": _mapped_libraries(),
        "memory": memory.read(),
        # How each input tensor arrived: "shm" (a view of a mapped segment) or "frame".
        "tensorsVia": {name: "shm" if shm.is_mapped(arr) else "frame" for name, arr in ctx.tensors.items()},
        # Segments whose mapping this worker keeps cached (shm.py): none once they are unlinked.
        "shmCached": shm.cached_segments(),
    }
