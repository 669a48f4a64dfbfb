"""`estimate.ortLoad`: what glibc's malloc keeps of what ONNX Runtime frees while it loads a
model (docs/memory.md, "Held by malloc"), measured the way `infer.ort` loads it.

ORT's CPU session creation parses the model (every initializer's raw bytes), copies each
initializer into an aligned tensor, frees the parsed bytes, pre-packs conv and gemm weights
and frees the copies it replaced. Freeing the first large mmapped block raises glibc's dynamic
mmap threshold to that block's size (up to 32 MiB), so every later block below it comes from
the heap, and what is freed there stays mapped: resnet18 keeps 76 MiB of 45 MiB of weights,
mobilenet_v2 17 of 13, vit_small 1 of 0.8. How much depends on the order and sizes of every
allocation, the small ones between the big ones included (a replay of the large blocks alone
gives 82 MiB for resnet18, with the small ones 76.5, measured 76.4), so this measures it
instead of modelling it: a fresh worker (nothing freed earlier to reuse), the session created
on the task's thread with `infer.ort`'s options, mallinfo2 read around it. Then which blocks
of that held memory the session's arena could take (free_pieces: ORT's first regions and
their tables come from it and cost no RSS).
"""
from __future__ import annotations

import os

from .. import free_pieces, malloc_stats, memory
from ..context import TaskContext


def run(ctx: TaskContext):
    import numpy  # noqa: F401  (infer.ort's import phase: the same arena state before the load)
    import onnxruntime as ort

    a = ctx.args
    model_path = a.path("model", must_exist=True)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.int("threads", 1, minimum=1)
    so.inter_op_num_threads = 1
    if not malloc_stats.available():
        return {"available": False, "heldKiB": None, "inUseKiB": None, "rssKiB": None, "anonKiB": None, "peakAboveEndKiB": None, "freePieces": None, "fileMaps": None}
    # VmHWM reset to the RSS here, so that after the load it is the load's own peak: the copies
    # ORT held side by side before freeing some (null where the kernel refuses the reset).
    peak_reset = memory.reset_peak()
    before, anon_before = memory.read(), memory.anon_kib()
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    after, anon_after = memory.read(), memory.anon_kib()
    file_maps = memory.file_mappings(os.path.dirname(os.path.abspath(model_path)), model_path)
    # Which of the held blocks ORT's arena regions and their tables could take next (this
    # thread's arena, as the session's first requests would find it). A refinement: where the
    # carving child fails, the held figure stands and the estimate counts the arena whole.
    try:
        pieces = free_pieces.free_pieces()
    except RuntimeError:
        pieces = None
    del sess
    return {
        "available": True,
        "heldKiB": max(0, after["mallocFreeKiB"] - before["mallocFreeKiB"]),
        "inUseKiB": after["mallocInUseKiB"] - before["mallocInUseKiB"],
        "rssKiB": after["rssKiB"] - before["rssKiB"],
        # Anonymous RSS growth: with heldKiB and inUseKiB, how much of what malloc has out or
        # keeps was never written (the arena regions' tails a quantized model's pre-packed
        # weights leave, src/estimate/ort-load.ts untouchedMiB).
        "anonKiB": anon_after - anon_before,
        "peakAboveEndKiB": max(0, after["hwmKiB"] - after["rssKiB"]) if peak_reset else None,
        "freePieces": pieces,
        # The model's external data ORT left mapped, its initializers read in place: resident
        # as requests read them, not at the load (src/estimate/ort-mapped.ts).
        "fileMaps": file_maps,
    }
