"""Every task end to end in a real worker: train -> export -> infer.torch / infer.ort ->
checkpoint.load, plus zoo.export for every zoo model. Files, phases, numerics checked."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from harness import Orchestrator
from memlane_worker.protocol import ErrorCode

SUPPORTED = {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
             "Erf", "Gelu", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Transpose",
             "Concat", "Softmax", "BatchNormalization", "Identity", "Dropout"}
INFER = {"batchSizes": [1, 64], "iterations": 5, "warmup": 1, "threads": 1}


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tasks")


@pytest.fixture(scope="module")
def trained(torch_worker, out_dir):
    """Training with the real defaults (12 epochs): the checkpoint the other tests use."""
    reply = torch_worker.run("train", {"outDir": str(out_dir / "train")}, timeout=120)
    return reply


@pytest.fixture(scope="module")
def heldout(trained):
    h = trained.value["heldout"]
    return np.fromfile(h["inputs"], "<f4").reshape(h["shape"]), np.fromfile(h["labels"], "<i8")


@pytest.fixture(scope="module")
def exported(torch_worker, trained, out_dir):
    return torch_worker.run("export", {"arch": "digits-cnn", "checkpoint": trained.value["checkpoint"],
                                       "out": str(out_dir / "digits.onnx")})


@pytest.fixture(scope="module")
def torch_outputs(torch_worker, trained, heldout):
    return torch_worker.run("infer.torch", {"arch": "digits-cnn", "checkpoint": trained.value["checkpoint"], **INFER},
                            {"inputs": heldout[0]})


@pytest.fixture(scope="module")
def ort_worker():
    o = Orchestrator(name="python-ort")
    yield o
    o.close()


def assert_marks(reply, names):
    """Every phase has a start and an end, in order, each with a full memory reading."""
    assert reply.phase_names() == names
    for mark in reply.phases:
        assert {"rssKiB", "pssKiB", "ussKiB", "swapKiB", "hwmKiB"} <= set(mark["memory"]), mark
        assert mark["tMs"] > 1.6e12
    ends = [p["name"] for p in reply.phases if p["mark"] == "end"]
    assert sorted(ends) == sorted(names)


def test_train_defaults_reach_095_heldout_accuracy_in_under_a_minute(trained):
    v = trained.value
    assert v["accuracy"] >= 0.95, v
    assert v["trainSeconds"] < 60 and v["epochs"] == 12 and v["device"] in ("cpu", "cuda")
    names = ["import", "data-load", *[f"epoch-{i}" for i in range(1, 13)], "checkpoint-save"]
    if v["device"] == "cuda":
        names.insert(1, "cuda-context")
    assert_marks(trained, names)
    assert [p["current"] for p in trained.progress] == list(range(1, 13))
    assert trained.progress[-1]["metrics"]["accuracy"] == pytest.approx(v["accuracy"])


def test_train_writes_files_atomically(trained, heldout):
    v = trained.value
    x, y = heldout
    assert x.shape == (360, 1, 8, 8) and y.shape == (360,) and set(np.unique(y)) == set(range(10))
    for path in (v["checkpoint"], v["checkpointPt"], v["heldout"]["inputs"], v["heldout"]["labels"]):
        assert os.path.isabs(path) and os.path.getsize(path) > 0
    assert not [f for f in os.listdir(os.path.dirname(v["checkpoint"])) if f.endswith(".tmp")]
    from safetensors.numpy import load_file
    assert "features.0.weight" in load_file(v["checkpoint"])


def test_train_two_epochs_is_seeded(torch_worker, tmp_path):
    args = {"outDir": str(tmp_path), "epochs": 2, "seed": 3, "arch": "mlp"}
    a = torch_worker.run("train", args).value
    b = torch_worker.run("train", args).value
    assert a["epochs"] == 2 and a["accuracy"] == b["accuracy"]


def test_train_refuses_bad_args(torch_worker, tmp_path):
    env = torch_worker.run("train", {"outDir": str(tmp_path), "epochs": 0}).final
    assert env["code"] == ErrorCode.INVALID_ARGUMENT and "'epochs'" in env["message"]


def test_export_is_dynamic_inline_and_supported(exported, out_dir):
    v = exported.value
    assert v["maxAbsDiff"] < 1e-4 and v["dynamicBatch"] is True
    model = onnx.load(v["onnx"], load_external_data=False)
    assert {n.op_type for n in model.graph.node} <= SUPPORTED
    assert model.opset_import[0].version >= 17
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # symbolic batch
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in model.graph.initializer)
    assert sorted(os.listdir(out_dir)) == ["digits.onnx", "train"]  # no external data, no temp files


def test_infer_torch(torch_outputs, trained, heldout):
    v = torch_outputs.value
    out = torch_outputs.tensors["outputs"]
    assert out.shape == (360, 10) and out.dtype == np.float32
    assert (out.argmax(1) == heldout[1]).mean() == pytest.approx(trained.value["accuracy"])
    for key in ("batch1", "batch64"):
        assert 0 < v["latencyMs"][key]["p50"] <= v["latencyMs"][key]["p99"]
    assert v["throughputPerS"] > 0 and v["variant"] == "eager"
    if v["device"] == "cpu":  # pipelined timing is on by default only on CUDA
        assert v["pipelinedThroughputPerS"] is None
        assert all("pipelinedMean" not in row for row in v["latencyMs"].values())
    assert_marks(torch_outputs, ["import", "runtime-create", "model-load", "first-inference", "steady-inference"])


def test_infer_torch_pipelined(torch_worker, trained, heldout, torch_outputs):
    """Requests launched back to back then drained once: a mean per request for every batch
    size, the throughput from the largest, and the same outputs."""
    args = {"arch": "digits-cnn", "checkpoint": trained.value["checkpoint"], **INFER}
    reply = torch_worker.run("infer.torch", {**args, "pipelined": True}, {"inputs": heldout[0]})
    v = reply.value
    for key in ("batch1", "batch64"):
        assert v["latencyMs"][key]["pipelinedMean"] > 0
    assert v["pipelinedThroughputPerS"] == pytest.approx(64 * 1000.0 / v["latencyMs"]["batch64"]["pipelinedMean"])
    assert np.abs(reply.tensors["outputs"] - torch_outputs.tensors["outputs"]).max() < 1e-5
    env = torch_worker.run("infer.torch", {**args, "pipelined": "yes"}, {"inputs": heldout[0]}).final
    assert env["code"] == ErrorCode.INVALID_ARGUMENT and "pipelined" in env["message"]


def test_infer_ort_matches_torch_and_never_imports_torch(ort_worker, exported, heldout, torch_outputs):
    reply = ort_worker.run("infer.ort", {"model": exported.value["onnx"], **INFER}, {"inputs": heldout[0]})
    out = reply.tensors["outputs"]
    assert np.abs(out - torch_outputs.tensors["outputs"]).max() < 1e-4
    assert reply.value["ort"] == {"cpuMemArena": True, "memPattern": True, "ioBinding": False,
                                  "graphOptimizationLevel": "all"}
    assert_marks(reply, ["import", "runtime-create", "model-load", "first-inference", "steady-inference"])
    switches = {"cpuMemArena": False, "memPattern": False, "ioBinding": True, "graphOptimizationLevel": "disable"}
    other = ort_worker.run("infer.ort", {"model": exported.value["onnx"], **INFER, "ort": switches},
                           {"inputs": heldout[0]})
    assert other.value["ort"] == switches
    assert np.abs(other.tensors["outputs"] - out).max() < 1e-5
    info = ort_worker.run("worker.info", {}).value
    assert info["torchImported"] is False and "torch" not in info["modules"]
    assert "onnxruntime" in info["modules"]
    assert not [lib for lib in info["sharedLibraries"] if "libtorch" in lib]


def test_infer_ort_bad_switch(ort_worker, exported, heldout):
    env = ort_worker.run("infer.ort", {"model": exported.value["onnx"], "ort": {"graphOptimizationLevel": "max"}},
                         {"inputs": heldout[0]}).final
    assert env["code"] == ErrorCode.INVALID_ARGUMENT and "graphOptimizationLevel" in env["message"]


@pytest.mark.parametrize("variant", ["cuda-graph", "fp16"])
def test_infer_torch_cuda_variants(torch_worker, trained, heldout, torch_outputs, variant):
    reply = torch_worker.run("infer.torch", {"arch": "digits-cnn", "checkpoint": trained.value["checkpoint"],
                                             "variant": variant, **INFER}, {"inputs": heldout[0]})
    if torch_outputs.value["device"] != "cuda":
        assert reply.final["code"] == ErrorCode.BACKEND_UNAVAILABLE and variant in reply.final["message"]
        pytest.skip(f"no CUDA here: checked that {variant} answers BACKEND_UNAVAILABLE")
    tol = 1e-2 if variant == "fp16" else 1e-4
    assert np.abs(reply.tensors["outputs"] - torch_outputs.tensors["outputs"]).max() < tol
    assert "gpuAllocatedKiB" in reply.phases[-1]["memory"]


@pytest.mark.parametrize("method", ["torch.load", "torch.load-mmap", "safetensors"])
def test_checkpoint_load(torch_worker, trained, method):
    path = trained.value["checkpoint" if method == "safetensors" else "checkpointPt"]
    reply = torch_worker.run("checkpoint.load", {"arch": "digits-cnn", "checkpoint": path, "method": method})
    v = reply.value
    assert v == {"method": method, "bytes": os.path.getsize(path), "params": 38282, "arch": "digits-cnn"}
    assert_marks(reply, ["import", "model-load", "first-inference"])


def test_checkpoint_load_refuses_the_wrong_format(torch_worker, trained):
    env = torch_worker.run("checkpoint.load", {"arch": "digits-cnn", "checkpoint": trained.value["checkpointPt"],
                                               "method": "safetensors"}).final
    assert env["code"] == ErrorCode.INVALID_ARGUMENT and ".safetensors" in env["message"]


@pytest.fixture(scope="module")
def resnet18_checkpoint(torch_worker, out_dir):
    return torch_worker.run("zoo.checkpoint", {"arch": "resnet18", "seed": 3, "outDir": str(out_dir / "zoo")}, timeout=120)


def test_zoo_checkpoint_writes_both_formats_with_the_seeded_weights(resnet18_checkpoint, out_dir):
    import torch
    from safetensors.torch import load_file

    from memlane_worker import zoo

    v = resnet18_checkpoint.value
    d = out_dir / "zoo"
    assert v["checkpoint"] == str(d / "resnet18.safetensors") and v["checkpointPt"] == str(d / "resnet18.pt")
    assert v["bytes"] == {"safetensors": os.path.getsize(v["checkpoint"]), "pt": os.path.getsize(v["checkpointPt"])}
    assert v["params"] == 11689512 and v["arch"] == "resnet18" and v["seed"] == 3
    # ~45 MiB of float32 weights in either format; written atomically (no temp file left)
    assert 44e6 < v["bytes"]["safetensors"] < 48e6 and 44e6 < v["bytes"]["pt"] < 48e6
    assert not [f for f in os.listdir(d) if f.endswith(".tmp")]
    assert_marks(resnet18_checkpoint, ["import", "model-load", "checkpoint-save"])
    torch.manual_seed(3)
    want = zoo.build("resnet18").state_dict()  # the weights zoo.export / infer.torch use for seed 3
    for got in (load_file(v["checkpoint"]), torch.load(v["checkpointPt"], weights_only=True)):
        assert set(got) == set(want)
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_zoo_checkpoint_refuses_an_unknown_arch(torch_worker, out_dir):
    env = torch_worker.run("zoo.checkpoint", {"arch": "nope", "outDir": str(out_dir / "zoo-bad")}).final
    assert env["code"] == ErrorCode.INVALID_ARGUMENT and "arch" in env["message"]


@pytest.mark.parametrize("method", ["torch.load", "torch.load-mmap", "safetensors"])
def test_checkpoint_load_of_a_zoo_checkpoint(torch_worker, resnet18_checkpoint, method):
    v = resnet18_checkpoint.value
    path = v["checkpoint" if method == "safetensors" else "checkpointPt"]
    reply = torch_worker.run("checkpoint.load", {"arch": "resnet18", "checkpoint": path, "method": method}, timeout=120)
    assert reply.value == {"method": method, "bytes": os.path.getsize(path), "params": 11689512, "arch": "resnet18"}
    assert_marks(reply, ["import", "model-load", "first-inference"])


ZOO = {  # arch -> (params, input shape)
    "digits-cnn": (38282, [-1, 1, 8, 8]),
    "mlp": (17226, [-1, 1, 8, 8]),
    "resnet-mini": (None, [-1, 3, 32, 32]),
    "resnet18": (11689512, [-1, 3, 224, 224]),
    "grouped-dilated": (None, [-1, 3, 16, 16]),
    "avgpool-concat": (None, [-1, 3, 16, 16]),
}


@pytest.mark.parametrize("arch", list(ZOO))
def test_zoo_export(torch_worker, tmp_path, arch):
    out = tmp_path / f"{arch}.onnx"
    v = torch_worker.run("zoo.export", {"arch": arch, "out": str(out), "seed": 1}, timeout=180).value
    params, shape = ZOO[arch]
    assert v["inputShape"] == shape and v["onnx"] == str(out)
    if params is not None:
        assert v["params"] == params
    assert v["maxAbsDiff"] < 1e-3, v
    model = onnx.load(str(out))
    ops = {n.op_type for n in model.graph.node}
    assert ops <= SUPPORTED, ops - SUPPORTED
    if arch == "grouped-dilated":
        convs = [n for n in model.graph.node if n.op_type == "Conv"]
        attrs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in convs]
        assert any(a.get("group", 1) > 1 for a in attrs) and any(max(a.get("dilations", [1])) > 1 for a in attrs)
    if arch == "avgpool-concat":
        assert {"AveragePool", "Concat", "Softmax"} <= ops


def test_seeded_random_weights_agree_between_zoo_export_and_infer_torch(torch_worker, ort_worker, tmp_path):
    out = str(tmp_path / "gd.onnx")
    torch_worker.run("zoo.export", {"arch": "grouped-dilated", "out": out, "seed": 5}).value
    x = np.random.default_rng(0).standard_normal((5, 3, 16, 16)).astype(np.float32)
    t = torch_worker.run("infer.torch", {"arch": "grouped-dilated", "seed": 5, **INFER}, {"inputs": x})
    o = ort_worker.run("infer.ort", {"model": out, **INFER}, {"inputs": x})
    assert np.abs(t.tensors["outputs"] - o.tensors["outputs"]).max() < 1e-4


def test_infer_ort_takes_its_inputs_from_shared_memory(ort_worker, exported, heldout, torch_outputs):
    from multiprocessing import shared_memory

    x = heldout[0]
    seg = shared_memory.SharedMemory(create=True, size=x.nbytes + 64)
    try:
        seg.buf[64:64 + x.nbytes] = x.tobytes()
        ort_worker.send({"v": 1, "type": "task", "id": "shm-ort", "task": "infer.ort",
                         "args": {"model": exported.value["onnx"], **INFER},
                         "tensors": [{"name": "inputs", "dtype": "float32", "shape": list(x.shape),
                                      "shm": {"segment": seg.name, "offset": 64, "length": x.nbytes}}]})
        reply = ort_worker.collect("shm-ort")
        assert np.abs(reply.tensors["outputs"] - torch_outputs.tensors["outputs"]).max() < 1e-4
    finally:
        seg.close()
        seg.unlink()
