"""`zoo.export`: a zoo model with seeded random weights -> ONNX, for models not trained here
(infer.torch with the same arch and seed and no checkpoint builds the same weights)."""
from __future__ import annotations

from ..context import TaskContext
from ..protocol import Phase

SAMPLE_BATCH = 2  # resnet18 at 224x224 makes larger check batches slow on small machines


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import torch

        from .. import zoo
        from . import onnx_export as ox
        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx)
    out = a.path("out")
    seed = a.int("seed", 0, minimum=0)
    opset = a.int("opset", ox.DEFAULT_OPSET, minimum=ox.MIN_OPSET)

    with ctx.phase(Phase.MODEL_LOAD):
        model = tc.load_model(ctx, arch, None, seed)
    sample = zoo.sample_inputs(arch, SAMPLE_BATCH, seed)
    proto = ox.to_onnx(model, torch.from_numpy(sample), opset, strict_ops=arch not in zoo.TRANSFORMERS)
    ox.save(proto, out)
    return {
        "onnx": out,
        "params": zoo.param_count(model),
        "inputShape": [-1, *zoo.input_shape(arch)],
        "inputDtype": zoo.input_dtype(arch),
        "maxAbsDiff": ox.max_abs_diff_vs_ort(model, proto, sample),
        "opset": opset,
        "ops": sorted({n.op_type for n in proto.graph.node}),
    }
