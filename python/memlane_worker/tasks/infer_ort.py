"""`infer.ort`: latency, throughput and eval-set outputs of an ONNX model under ONNX Runtime.

Never imports torch (directly or through this package): its RAM figures are the point of
running it in a separate worker. The memory switches are ORT's own session options:
`cpuMemArena` (enable_cpu_mem_arena), `memPattern` (enable_mem_pattern), `ioBinding`
(bind inputs/outputs instead of run()), `graphOptimizationLevel`.
"""
from __future__ import annotations

from ..context import TaskContext
from ..errors import TaskError
from ..protocol import ErrorCode, Phase
from . import io_spec, ort_profile, timing

LEVELS = ("disable", "basic", "extended", "all")


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import numpy as np
        import onnxruntime as ort

    a = ctx.args
    model_path = a.path("model", must_exist=True)
    opts = timing.common_args(ctx)
    o = a.map("ort", {})
    cpu_mem_arena = o.bool("cpuMemArena", True)
    mem_pattern = o.bool("memPattern", True)
    io_binding = o.bool("ioBinding", False)
    level_name = o.choice("graphOptimizationLevel", LEVELS, "all")
    io = io_spec.parse(ctx)
    # Multi-input form: every graph input from `input:<name>`, every output back; else the
    # legacy single "inputs" (the first graph input) and "outputs" (the first output).
    inputs = io_spec.eval_inputs(ctx, io[0]) if io else np.ascontiguousarray(ctx.tensor("inputs"), dtype=np.float32)
    device = a.choice("device", ("cpu", "cuda", "auto"), "auto")
    have_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "cuda" and not have_cuda:
        raise TaskError(ErrorCode.BACKEND_UNAVAILABLE,
                        f"infer.ort: device 'cuda' requested but onnxruntime {ort.__version__} has providers "
                        f"{ort.get_available_providers()}", {"device": "cuda"})
    device = "cuda" if device == "cuda" or (device == "auto" and have_cuda) else "cpu"
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]

    profile_batch = a.int("profileBatch", opts["batch_sizes"][0], minimum=1) if a.bool("profile", False) else None
    if profile_batch is not None and profile_batch not in opts["batch_sizes"]:
        raise a.fail("profileBatch", "one of batchSizes", profile_batch)

    def session_options():
        so = ort.SessionOptions()
        so.enable_cpu_mem_arena = cpu_mem_arena
        so.enable_mem_pattern = mem_pattern
        so.intra_op_num_threads = opts["threads"]
        so.inter_op_num_threads = 1
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[level_name]
        return so

    with ctx.phase(Phase.RUNTIME_CREATE):
        so = session_options()

    with ctx.phase(Phase.MODEL_LOAD):
        sess = ort.InferenceSession(model_path, sess_options=so, providers=providers)
        in_name = sess.get_inputs()[0].name
        out_names = [o.name for o in io[1]] if io else [sess.get_outputs()[0].name]

    def feed_of(x) -> dict:
        return x if io else {in_name: x}

    if io:
        batches = {n: io_spec.rows(io[0], inputs, n) for n in opts["batch_sizes"]}
    else:
        batches = {n: timing.batch_of(inputs, n) for n in opts["batch_sizes"]}
    binding = sess.io_binding() if io_binding else None

    def run_all(x) -> list:
        if binding is None:
            return sess.run(out_names, feed_of(x))
        for name, value in feed_of(x).items():
            binding.bind_cpu_input(name, value)
        for name in out_names:
            binding.bind_output(name)
        sess.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()

    def infer(x: np.ndarray) -> np.ndarray:
        return run_all(x)[0]

    def call(n: int) -> None:
        infer(batches[n])

    with ctx.phase(Phase.FIRST_INFERENCE):
        call(opts["batch_sizes"][0])

    with ctx.phase(Phase.STEADY_INFERENCE):
        latency, throughput = timing.measure(ctx, call, opts["batch_sizes"], opts["iterations"], opts["warmup"])
        if io:
            outputs = io_spec.over_eval_set(ctx, io[0], io[1], inputs, max(opts["batch_sizes"]), run_all)
        else:
            outputs = {"outputs": timing.over_eval_set(ctx, inputs, max(opts["batch_sizes"]), infer)}

    profile = None
    if profile_batch is not None:
        # After steady-inference (its marks are taken): ORT's profiler in a session of its own.
        def profiling_session(prefix: str):
            pso = session_options()
            pso.enable_profiling = True
            pso.profile_file_prefix = prefix
            return ort.InferenceSession(model_path, sess_options=pso, providers=providers)

        profile = ort_profile.profile(profiling_session, lambda ps: ps.run(out_names, feed_of(batches[profile_batch])),
                                      profile_batch, a.int("profileIterations", opts["iterations"], minimum=1),
                                      ctx.check_cancel)

    value = {
        "latencyMs": latency, "throughputPerS": throughput, "device": device, "threads": opts["threads"],
        "ort": {"cpuMemArena": cpu_mem_arena, "memPattern": mem_pattern, "ioBinding": io_binding,
                "graphOptimizationLevel": level_name},
        "providers": sess.get_providers(),
        **({"profile": profile} if profile is not None else {}),
    }
    return value, outputs
