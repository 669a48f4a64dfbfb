"""`infer.torch`: latency, throughput and eval-set outputs of a zoo model under PyTorch.

Variants: `eager` (CPU or CUDA), `cuda-graph` (one captured graph per batch size, replayed:
no per-op launch cost) and `fp16` (half-precision weights and inputs, float32 outputs).
The last two need CUDA and answer BACKEND_UNAVAILABLE without it. On CUDA a request is timed
host -> host (pinned upload, forward, pinned download), and also `iterations` requests
enqueued back to back then synchronised once (`pipelinedMean`), as memlane-rt is timed.
"""
from __future__ import annotations

from ..context import TaskContext
from ..errors import TaskError
from ..protocol import ErrorCode, Phase
from . import io_spec, timing

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
    io = io_spec.parse(ctx)
    if io and (len(io[0]) != 1 or io[0][0].batch_axis != 0 or len(io[1]) != 1):
        raise a.fail("io", "one input with its batch at axis 0 and one output (zoo models take one tensor)",
                     {"inputs": [s.name for s in io[0]], "outputs": [s.name for s in io[1]]})
    # The zoo's models take one tensor: the multi-input form names it; the legacy form is "inputs".
    inputs = io_spec.eval_inputs(ctx, io[0])[io[0][0].name] if io else ctx.tensor("inputs")
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

    on_cuda = device == "cuda"
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    # On CUDA a timed request goes host -> host, as memlane-rt's does: upload the batch from
    # pinned host memory, run, download the outputs into pinned host memory. Timing only the
    # forward on a batch already on the GPU would leave out the copies the native runtime
    # pays. On the CPU the batch is the input as it is.
    host = {n: torch.from_numpy(timing.batch_of(inputs, n)) for n in opts["batch_sizes"]}
    if on_cuda:
        host = {n: t.pin_memory() for n, t in host.items()}
    # Floating inputs take the variant's dtype; integer ones (tiny-gpt's byte ids) stay as they are.
    def to_model(t):
        return t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device=device)

    batches = {n: to_model(t) for n, t in host.items()}  # graph capture's static inputs
    out_host: dict[int, "torch.Tensor"] = {}
    graphs: dict[int, tuple] = {}
    pipelined = a.bool("pipelined", on_cuda)

    def forward(x):
        with torch.inference_mode():
            return model(x)

    def launch(n: int) -> None:
        """Enqueues one request (no synchronisation on CUDA)."""
        if on_cuda:
            batches[n].copy_(host[n], non_blocking=True)
        if variant == "cuda-graph":
            graphs[n][0].replay()
            out = graphs[n][1]
        else:
            out = forward(batches[n])
        if on_cuda:
            if n not in out_host:
                out_host[n] = torch.empty(out.shape, dtype=torch.float32, pin_memory=True)
            out_host[n].copy_(out, non_blocking=True)

    def call(n: int) -> None:
        launch(n)
        sync()
    with ctx.phase(Phase.FIRST_INFERENCE):
        if variant == "cuda-graph":
            graphs.update(_capture(torch, model, batches))
        call(opts["batch_sizes"][0])

    with ctx.phase(Phase.STEADY_INFERENCE):
        latency, throughput = timing.measure(ctx, call, opts["batch_sizes"], opts["iterations"], opts["warmup"],
                                             launch=launch if pipelined else None, drain=sync)
        chunk = max(opts["batch_sizes"])

        def eval_chunk(x: np.ndarray) -> np.ndarray:
            # Eager for the eval set: its last chunk may be smaller than any captured graph.
            out = forward(to_model(torch.from_numpy(x)))
            return out.float().cpu().numpy()

        outputs = timing.over_eval_set(ctx, inputs, chunk, eval_chunk)

    value = {"latencyMs": latency, "throughputPerS": throughput, "device": device, "variant": variant,
             "threads": opts["threads"],
             "pipelinedThroughputPerS": timing.pipelined_throughput(latency, opts["batch_sizes"])}
    return value, {(f"output:{io[1][0].name}" if io else "outputs"): outputs}


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
