"""tiny-gpt end to end in a real worker with a few steps: train on stdlib text (disjoint
held-out files, int64 windows), export with a dynamic batch, ONNX Runtime agreeing with
torch on the held-out next-byte accuracy."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from harness import Orchestrator
from memlane_worker import tinygpt

FAST = {"arch": "tiny-gpt", "epochs": 2, "stepsPerEpoch": 3, "batchSize": 8}


@pytest.fixture(scope="module")
def trained(torch_worker, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt")
    return torch_worker.run("train", {**FAST, "outDir": str(out / "train")}, timeout=180)


def test_split_is_seeded_and_disjoint():
    train, held = tinygpt.split_files(0)
    assert set(train).isdisjoint(held) and len(held) == tinygpt.HELDOUT_FILES
    assert tinygpt.split_files(0) == (train, held)
    assert tinygpt.split_files(1)[1] != held
    _, x, y, info = tinygpt.load(0)
    assert x.shape == (tinygpt.HELDOUT_WINDOWS, tinygpt.CONTEXT) and x.dtype == np.int64 and y.shape == (len(x),)
    assert info["trainBytes"] >= tinygpt.TRAIN_BYTES and 0 <= x.min() and x.max() < 256


def test_train_writes_int64_heldout_and_marks_phases(trained):
    v = trained.value
    h = v["heldout"]
    assert h["dtype"] == "int64" and h["shape"] == [tinygpt.HELDOUT_WINDOWS, tinygpt.CONTEXT]
    x = np.fromfile(h["inputs"], "<i8").reshape(h["shape"])
    y = np.fromfile(h["labels"], "<i8")
    _, want_x, want_y, _ = tinygpt.load(0)
    assert np.array_equal(x, want_x) and np.array_equal(y, want_y)
    assert v["steps"] == 6 and v["epochs"] == 2 and 0.0 <= v["accuracy"] <= 1.0
    assert set(v["data"]["trainFiles"]).isdisjoint(v["data"]["heldoutFiles"])
    assert trained.phase_names() == ["import", "data-load", "epoch-1", "epoch-2", "checkpoint-save"]
    assert [p["current"] for p in trained.progress] == [1, 2]


def test_train_is_seeded(torch_worker, trained, tmp_path):
    again = torch_worker.run("train", {**FAST, "outDir": str(tmp_path)}, timeout=180).value
    assert again["accuracy"] == trained.value["accuracy"]


def test_export_dynamic_batch_int64_and_ort_accuracy_equals_torch(torch_worker, trained, tmp_path):
    import onnxruntime as ort

    v = trained.value
    out = tmp_path / "tiny-gpt.onnx"
    e = torch_worker.run("export", {"arch": "tiny-gpt", "checkpoint": v["checkpoint"], "out": str(out)}, timeout=300).value
    assert e["maxAbsDiff"] < 1e-4, e
    model = onnx.load(str(out))
    (inp,) = model.graph.input
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.INT64
    dims = inp.type.tensor_type.shape.dim
    assert dims[0].dim_param and dims[1].dim_value == tinygpt.CONTEXT
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim][1:] == [256]
    h = v["heldout"]
    x = np.fromfile(h["inputs"], "<i8").reshape(h["shape"])
    y = np.fromfile(h["labels"], "<i8")
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    logits = np.concatenate([sess.run(None, {inp.name: x[i:i + 100]})[0] for i in range(0, len(x), 100)])
    assert logits.shape == (len(x), 256)
    assert abs(float((logits.argmax(1) == y).mean()) - v["accuracy"]) <= 1 / len(y)


def test_infer_torch_takes_int64_windows(torch_worker, trained):
    v = trained.value
    h = v["heldout"]
    x = np.fromfile(h["inputs"], "<i8").reshape(h["shape"])
    y = np.fromfile(h["labels"], "<i8")
    reply = torch_worker.run("infer.torch", {"arch": "tiny-gpt", "checkpoint": v["checkpoint"], "batchSizes": [1, 8],
                                             "iterations": 2, "warmup": 1, "threads": 1, "device": "cpu"},
                             {"inputs": x}, timeout=180)
    out = reply.tensors["outputs"]
    assert out.shape == (len(x), 256) and out.dtype == np.float32
    assert float((out.argmax(1) == y).mean()) == v["accuracy"]
