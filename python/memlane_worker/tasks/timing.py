"""Latency measurement shared by the infer.* tasks (numpy only: infer.ort must not load torch).

Latency is taken around the runtime's own call: `warmup` untimed calls, then `iterations`
timed ones per batch size. The batch is the first N rows of the eval set, tiled when the
eval set is smaller than N, so every runtime times the very same inputs.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ..context import TaskContext


def batch_of(inputs: np.ndarray, n: int) -> np.ndarray:
    if inputs.shape[0] == 0:
        raise ValueError("the eval set is empty")
    reps = -(-n // inputs.shape[0])
    rows = inputs if reps == 1 else np.concatenate([inputs] * reps)
    return np.ascontiguousarray(rows[:n])


def measure(ctx: TaskContext, call: Callable[[int], None], batch_sizes: list[int], iterations: int,
            warmup: int, launch: Callable[[int], None] | None = None,
            drain: Callable[[], None] | None = None) -> tuple[dict[str, dict[str, float]], float]:
    """({'batch<N>': {p50, p99, mean[, pipelinedMean]}} in ms, samples/s at the largest batch).

    `call(n)` runs one inference on the prepared batch of size n and returns once the
    result is available on the host or device has finished (the caller synchronises).
    With `launch` (enqueue one request without waiting) and `drain` (wait for all), each
    batch size is also timed as `iterations` launches back to back then one drain:
    `pipelinedMean` is that wall time per request.
    """
    latency: dict[str, dict[str, float]] = {}
    total = len(batch_sizes) * iterations
    done = 0
    for n in batch_sizes:
        for _ in range(warmup):
            ctx.check_cancel()
            call(n)
        times = np.empty(iterations, dtype=np.float64)
        for i in range(iterations):
            ctx.check_cancel()
            t0 = time.perf_counter()
            call(n)
            times[i] = (time.perf_counter() - t0) * 1000.0
        done += iterations
        latency[f"batch{n}"] = {
            "p50": float(np.percentile(times, 50)),
            "p99": float(np.percentile(times, 99)),
            "mean": float(times.mean()),
        }
        if launch is not None:
            t0 = time.perf_counter()
            for _ in range(iterations):
                ctx.check_cancel()
                launch(n)
            if drain is not None:
                drain()
            latency[f"batch{n}"]["pipelinedMean"] = (time.perf_counter() - t0) * 1000.0 / iterations
        ctx.progress(done, total, f"batch {n}", latency[f"batch{n}"])
    largest = max(batch_sizes)
    throughput = largest / (latency[f"batch{largest}"]["mean"] / 1000.0)
    return latency, throughput


def pipelined_throughput(latency: dict[str, dict[str, float]], batch_sizes: list[int]) -> float | None:
    """Samples/s at the largest batch from its pipelined mean; None when not pipelined."""
    largest = max(batch_sizes)
    mean = latency[f"batch{largest}"].get("pipelinedMean")
    return largest / (mean / 1000.0) if mean else None


def over_eval_set(ctx: TaskContext, inputs: np.ndarray, chunk: int,
                  call: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The model's outputs for every eval input, computed in chunks of `chunk` rows."""
    outs = []
    for start in range(0, inputs.shape[0], chunk):
        ctx.check_cancel()
        outs.append(np.asarray(call(np.ascontiguousarray(inputs[start:start + chunk])), dtype=np.float32))
    return np.concatenate(outs) if outs else np.zeros((0,), np.float32)


def common_args(ctx: TaskContext) -> dict:
    a = ctx.args
    return {
        "batch_sizes": a.int_list("batchSizes", [1, 64]),
        "iterations": a.int("iterations", 20, minimum=1),
        "warmup": a.int("warmup", 3, minimum=0),
        "threads": a.int("threads", 1, minimum=1),
    }
