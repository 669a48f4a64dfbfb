"""Per-op profile of an ONNX Runtime session (infer.ort's `profile` arg, docs/profiling.md).

Taken after the timed calls, in a second session created with ORT's own profiler on
(SessionOptions.enable_profiling), so that profiling never touches the latency figures. ORT
writes a Chrome-trace JSON file; its "Node" events with a name ending in "_kernel_time" are
one kernel call each (dur in µs, args.op_name the op type after ORT's fusions). The file goes
to a temp dir (the worker's TMPDIR: the run's scratch dir) and is deleted once read.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Callable

KERNEL_SUFFIX = "_kernel_time"


def parse(events: list[dict], after_us: float = 0.0) -> list[dict]:
    """Kernel events that start at or after `after_us`, summed per node in order of first call:
    [{name, opType, totalMs, minMs, calls}] (minMs: the fastest single call)."""
    by_node: dict[str, dict] = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX) or float(e.get("ts", 0)) < after_us:
            continue
        node = name[: -len(KERNEL_SUFFIX)]
        rec = by_node.setdefault(node, {"name": node, "opType": (e.get("args") or {}).get("op_name", "?"),
                                        "totalMs": 0.0, "minMs": None, "calls": 0})
        ms = float(e.get("dur", 0)) / 1000.0
        rec["totalMs"] += ms
        rec["minMs"] = ms if rec["minMs"] is None else min(rec["minMs"], ms)
        rec["calls"] += 1
    return list(by_node.values())


def first_run_end(events: list[dict]) -> float:
    """End (µs since the profile began) of the first model_run: the warm-up call."""
    runs = sorted((float(e["ts"]), float(e.get("dur", 0))) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run" and "ts" in e)
    return runs[0][0] + runs[0][1] if runs else 0.0


def profile(make_session: Callable[[str], object], run: Callable[[object], None], batch: int, runs: int,
            check_cancel: Callable[[], None]) -> dict:
    """`make_session(prefix)` builds a session profiling to files named prefix_*; `run(sess)`
    is one call at `batch`. One warm-up call, then `runs` profiled ones."""
    tmp = tempfile.mkdtemp(prefix="memlane-ort-profile-")
    try:
        sess = make_session(os.path.join(tmp, "ort"))
        run(sess)
        wall = 0.0
        for _ in range(runs):
            check_cancel()
            t0 = time.perf_counter()
            run(sess)
            wall += time.perf_counter() - t0
        path = sess.end_profiling()
        with open(path) as f:
            events = json.load(f)
        del sess
        return {"batch": batch, "runs": runs, "wallMsMean": wall * 1000.0 / runs,
                "ops": parse(events, first_run_end(events))}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
