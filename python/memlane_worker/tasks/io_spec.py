"""The multi-input form of the infer tasks (docs/worker-tasks.md, "Several inputs and outputs").

`args.io = {inputs: [IoSpec], outputs: [IoSpec]}`, IoSpec = {name, dtype, shape (-1 at the
batch axis), batchAxis (-1: no batch)}. Each input arrives batch first as the tensor
`input:<name>`; each output goes back batch first as `output:<name>`. Without `args.io` the
legacy form applies: one tensor "inputs" for the first graph input, one "outputs" back.
numpy only: infer.ort must not load torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..codec import NUMPY_DTYPES
from ..context import TaskContext
from ..errors import TaskError
from ..protocol import ErrorCode


@dataclass(frozen=True)
class Spec:
    name: str
    dtype: str
    shape: tuple[int, ...]
    batch_axis: int


def _specs(ctx: TaskContext, key: str, raw) -> list[Spec]:
    a = ctx.args
    if not isinstance(raw, list) or (key == "inputs" and not raw):
        raise a.fail(f"io.{key}", "a non-empty list of {name, dtype, shape, batchAxis}", raw)
    out = []
    for i, s in enumerate(raw):
        where = f"io.{key}[{i}]"
        ok = (isinstance(s, dict) and isinstance(s.get("name"), str) and s.get("dtype") in NUMPY_DTYPES
              and isinstance(s.get("shape"), list) and all(isinstance(d, int) and not isinstance(d, bool) for d in s["shape"])
              and isinstance(s.get("batchAxis"), int) and -1 <= s["batchAxis"] < max(1, len(s["shape"])))
        if not ok:
            raise a.fail(where, f"{{name, dtype (one of {', '.join(NUMPY_DTYPES)}), shape: [int], batchAxis: int}}", s)
        out.append(Spec(s["name"], s["dtype"], tuple(s["shape"]), s["batchAxis"]))
    return out


def parse(ctx: TaskContext) -> tuple[list[Spec], list[Spec]] | None:
    """(inputs, outputs) of `args.io`, or None for the legacy form."""
    raw = ctx.args.values.get("io")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ctx.args.fail("io", "a map {inputs, outputs}", raw)
    return _specs(ctx, "inputs", raw.get("inputs")), _specs(ctx, "outputs", raw.get("outputs", []))


def _wire_dims(spec: Spec) -> tuple[int, ...]:
    return spec.shape if spec.batch_axis < 0 else tuple(d for k, d in enumerate(spec.shape) if k != spec.batch_axis)


def eval_inputs(ctx: TaskContext, specs: list[Spec]) -> dict[str, np.ndarray]:
    """name -> the batch-first eval tensor of every input; SHAPE_MISMATCH naming the input otherwise."""
    out = {}
    for s in specs:
        key = f"input:{s.name}"
        if key not in ctx.tensors:
            raise TaskError(ErrorCode.SHAPE_MISMATCH, f"{ctx.task}: input \"{s.name}\" missing: no tensor '{key}' "
                            f"(received {', '.join(sorted(ctx.tensors)) or 'none'})", {"input": s.name})
        t = ctx.tensors[key]
        got = tuple(t.shape) if s.batch_axis < 0 else tuple(t.shape[1:])
        if t.dtype != NUMPY_DTYPES[s.dtype] or got != _wire_dims(s):
            raise TaskError(ErrorCode.SHAPE_MISMATCH,
                            f"{ctx.task}: input \"{s.name}\": expected {s.dtype} [N, {', '.join(map(str, _wire_dims(s)))}], "
                            f"received {NUMPY_DTYPES_NAME.get(t.dtype.str, str(t.dtype))} {list(t.shape)}",
                            {"input": s.name, "expected": s.dtype, "received": str(t.dtype)})
        out[s.name] = t
    return out


NUMPY_DTYPES_NAME = {dt.str: name for name, dt in NUMPY_DTYPES.items()}


def rows(specs: list[Spec], tensors: dict[str, np.ndarray], n: int, start: int = 0) -> dict[str, np.ndarray]:
    """The feed of one call at batch n from row `start` (tiled), each input in the model's layout."""
    feed = {}
    for s in specs:
        t = tensors[s.name]
        if s.batch_axis < 0:
            feed[s.name] = t
            continue
        total = t.shape[0]
        x = t[start:start + n] if start + n <= total else t[np.arange(start, start + n) % total]
        if s.batch_axis > 0:
            x = np.moveaxis(x, 0, s.batch_axis)
        feed[s.name] = np.ascontiguousarray(x)
    return feed


def eval_count(specs: list[Spec], tensors: dict[str, np.ndarray]) -> int:
    batched = [tensors[s.name].shape[0] for s in specs if s.batch_axis >= 0]
    return batched[0] if batched else 1


def over_eval_set(ctx: TaskContext, inputs: list[Spec], outputs: list[Spec], tensors: dict[str, np.ndarray],
                  chunk: int, call: Callable[[dict[str, np.ndarray]], list[np.ndarray]]) -> dict[str, np.ndarray]:
    """`output:<name>` -> the output over every eval row, batch first (an output without batch: the first chunk's)."""
    total = eval_count(inputs, tensors)
    parts: list[list[np.ndarray]] = [[] for _ in outputs]
    for start in range(0, total, chunk):
        ctx.check_cancel()
        n = min(chunk, total - start)
        res = call(rows(inputs, tensors, n, start))
        if len(res) != len(outputs):
            raise TaskError(ErrorCode.TASK_FAILED, f"{ctx.task}: the model returned {len(res)} outputs, io.outputs names {len(outputs)}")
        for k, (spec, r) in enumerate(zip(outputs, res)):
            r = np.asarray(r)
            if r.dtype == np.float64:  # no float64 on the wire; ORT models rarely produce it
                r = r.astype(np.float32)
            if spec.batch_axis > 0:
                r = np.moveaxis(r, spec.batch_axis, 0)
            if spec.batch_axis >= 0 or not parts[k]:
                parts[k].append(np.ascontiguousarray(r))
    return {f"output:{s.name}": (np.concatenate(p) if s.batch_axis >= 0 else p[0]) for s, p in zip(outputs, parts)}
