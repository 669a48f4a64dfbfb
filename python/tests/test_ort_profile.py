"""infer.ort's per-op profile (args.profile, docs/profiling.md): ORT's own profiler in a second
session after the timed calls, its JSON parsed into per-node times and deleted. A real worker
and a real ONNX file built with onnx.helper (MatMul -> Add -> Relu, unfused at level "disable")."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness import Orchestrator
from memlane_worker.tasks import ort_profile

INFER = {"batchSizes": [1, 4], "iterations": 3, "warmup": 0, "threads": 1, "ort": {"graphOptimizationLevel": "disable"}}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["y"], name="act")]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path_factory.mktemp("prof") / "mlp.onnx"
    onnx.save(m, path)
    return str(path)


@pytest.fixture(scope="module")
def worker():
    o = Orchestrator(name="python-ort")
    yield o
    o.close()


def test_profile_names_every_node_and_leaves_no_file(worker, model):
    before = set(os.listdir(tempfile.gettempdir()))
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    reply = worker.run("infer.ort", {"model": model, **INFER, "profile": True, "profileBatch": 4, "profileIterations": 5}, {"inputs": x})
    p = reply.value["profile"]
    assert p["batch"] == 4 and p["runs"] == 5 and p["wallMsMean"] > 0
    by_name = {o["name"]: o for o in p["ops"]}
    assert {n: o["opType"] for n, o in by_name.items()} == {"mm": "MatMul", "bias": "Add", "act": "Relu"}
    assert all(o["calls"] == 5 and o["totalMs"] >= 0 for o in p["ops"])  # the warm-up call is left out
    assert sum(o["totalMs"] for o in p["ops"]) / 5 <= p["wallMsMean"]
    left = {f for f in set(os.listdir(tempfile.gettempdir())) - before if f.startswith("memlane-ort-profile-")}
    assert not left


def test_profile_batch_must_be_a_timed_batch(worker, model):
    x = np.zeros((4, 64), np.float32)
    env = worker.run("infer.ort", {"model": model, **INFER, "profile": True, "profileBatch": 3}, {"inputs": x}).final
    assert env["type"] == "error" and "profileBatch" in env["message"]


def test_parse_keeps_kernel_events_after_the_cutoff():
    ev = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 10},
          {"cat": "Node", "name": "a_kernel_time", "ts": 5, "dur": 1000, "args": {"op_name": "Conv"}},
          {"cat": "Session", "name": "model_run", "ts": 20, "dur": 10},
          {"cat": "Node", "name": "a_fence_before", "ts": 21, "dur": 0, "args": {"op_name": "Conv"}},
          {"cat": "Node", "name": "a_kernel_time", "ts": 22, "dur": 2000, "args": {"op_name": "Conv"}}]
    assert ort_profile.parse(ev, ort_profile.first_run_end(ev)) == [{"name": "a", "opType": "Conv", "totalMs": 2.0, "minMs": 2.0, "calls": 1}]
