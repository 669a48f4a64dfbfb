"""`export`: a trained checkpoint -> ONNX with a dynamic batch axis, checked against ORT."""
from __future__ import annotations

from ..context import TaskContext
from ..protocol import Phase

SAMPLE_BATCH = 7  # odd on purpose: catches a batch size baked into the graph


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import torch

        from .. import zoo
        from . import onnx_export as ox
        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx)
    checkpoint = a.path("checkpoint", must_exist=True)
    out = a.path("out")
    opset = a.int("opset", ox.DEFAULT_OPSET, minimum=ox.MIN_OPSET)

    with ctx.phase(Phase.MODEL_LOAD):
        model = tc.load_model(ctx, arch, checkpoint, seed=0)
    sample = zoo.sample_inputs(arch, SAMPLE_BATCH, 0)
    proto = ox.to_onnx(model, torch.from_numpy(sample), opset, strict_ops=arch not in zoo.TRANSFORMERS)
    ox.save(proto, out)
    return {
        "onnx": out,
        "maxAbsDiff": ox.max_abs_diff_vs_ort(model, proto, sample),
        "dynamicBatch": True,
        "opset": opset,
        "ops": sorted({n.op_type for n in proto.graph.node}),
    }
