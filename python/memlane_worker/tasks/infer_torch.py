"""`infer.torch`: latency, throughput and eval-set outputs of a zoo model under PyTorch.

Variants: `eager` (CPU or CUDA), `cuda-graph` (one captured graph per batch size, replayed:
no per-op launch cost) and `fp16` (half-precision weights and inputs, float32 outputs).
The last two need CUDA and answer BACKEND_UNAVAILABLE without it.
"""
from __future__ import annotations

from ..context import TaskContext
from ..errors import TaskError
from ..protocol import ErrorCode, Phase
from . import timing

VARIANTS = ("eager", "cuda-graph", "fp16")


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import numpy as np
        import torch

        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx)
    checkpoint = a.path("checkpoint", None, must_exist=True)
    seed = a.int("seed", 0, minimum=0)
    opts = timing.common_args(ctx)
    variant = a.choice("variant", VARIANTS, "eager")
    inputs = ctx.tensor("inputs")
    device = tc.device_arg(ctx)
    if variant != "eager" and device != "cuda":
        raise TaskError(ErrorCode.BACKEND_UNAVAILABLE,
                        f"infer.torch: variant {variant!r} needs CUDA, but the device is {device} "
                        f"(torch.cuda.is_available() is {torch.cuda.is_available()})",
                        {"variant": variant, "device": device})

    with ctx.phase(Phase.RUNTIME_CREATE):
        torch.set_num_threads(opts["threads"])
    tc.init_device(ctx, device)

    dtype = torch.float16 if variant == "fp16" else torch.float32
    with ctx.phase(Phase.MODEL_LOAD):
        model = tc.load_model(ctx, arch, checkpoint, seed)
    if device == "cuda":  # host -> GPU copy in its own phase: the host copy's fate shows there
        with ctx.phase(Phase.WEIGHTS_UPLOAD):
            model = model.to(device=device, dtype=dtype)

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    batches = {n: torch.from_numpy(timing.batch_of(inputs, n)).to(device=device, dtype=dtype)
               for n in opts["batch_sizes"]}
    graphs: dict[int, tuple] = {}

    def forward(x):
        with torch.inference_mode():
            return model(x)

    def call(n: int) -> None:
        if variant == "cuda-graph":
            graphs[n][0].replay()
        else:
            forward(batches[n])
        sync()

    with ctx.phase(Phase.FIRST_INFERENCE):
        if variant == "cuda-graph":
            graphs.update(_capture(torch, model, batches))
        call(opts["batch_sizes"][0])

    with ctx.phase(Phase.STEADY_INFERENCE):
        latency, throughput = timing.measure(ctx, call, opts["batch_sizes"], opts["iterations"], opts["warmup"])
        chunk = max(opts["batch_sizes"])

        def eval_chunk(x: np.ndarray) -> np.ndarray:
            # Eager for the eval set: its last chunk may be smaller than any captured graph.
            out = forward(torch.from_numpy(x).to(device=device, dtype=dtype))
            return out.float().cpu().numpy()

        outputs = timing.over_eval_set(ctx, inputs, chunk, eval_chunk)

    value = {"latencyMs": latency, "throughputPerS": throughput, "device": device, "variant": variant,
             "threads": opts["threads"]}
    return value, {"outputs": outputs}


def _capture(torch, model, batches):
    """One CUDA graph per batch size, capturing into static input/output buffers."""
    graphs = {}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.inference_mode(), torch.cuda.stream(stream):
        for x in batches.values():  # warm-up on a side stream, as torch.cuda.graphs advises
            model(x)
    torch.cuda.current_stream().wait_stream(stream)
    for n, x in batches.items():
        g = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(g):
            out = model(x)
        graphs[n] = (g, out)
    return graphs
