"""infer.ort in the multi-input form (args.io, docs/worker-tasks.md): every graph input in its
own dtype, a batch axis that is not 0 moved by the worker, every output back batch first, and
the refusals naming the input. A real worker, a real ONNX file built with onnx.helper."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness import Orchestrator
from memlane_worker.protocol import ErrorCode

TABLE = np.arange(30, dtype=np.float32).reshape(10, 3)
IO = {
    "inputs": [
        {"name": "ids", "dtype": "int64", "shape": [-1, 4], "batchAxis": 0},
        {"name": "tm", "dtype": "float32", "shape": [5, -1], "batchAxis": 1},  # time-major
    ],
    "outputs": [
        {"name": "emb", "dtype": "float32", "shape": [-1, 4, 3], "batchAxis": 0},
        {"name": "tm_out", "dtype": "float32", "shape": [5, -1], "batchAxis": 1},
    ],
}
INFER = {"batchSizes": [1, 4], "iterations": 2, "warmup": 0, "threads": 1}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]), helper.make_node("Relu", ["tm"], ["tm_out"])]
    g = helper.make_graph(
        nodes, "io",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 4]),
         helper.make_tensor_value_info("tm", TensorProto.FLOAT, [5, "batch"])],
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["batch", 4, 3]),
         helper.make_tensor_value_info("tm_out", TensorProto.FLOAT, [5, "batch"])],
        [numpy_helper.from_array(TABLE, "table")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path_factory.mktemp("io") / "io.onnx"
    onnx.save(m, path)
    return str(path)


@pytest.fixture(scope="module")
def worker():
    o = Orchestrator(name="python-ort")
    yield o
    o.close()


def test_every_input_in_its_dtype_and_every_output_back_batch_first(worker, model):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 10, (6, 4)).astype(np.int64)
    tm = rng.standard_normal((6, 5)).astype(np.float32)  # batch first on the wire
    reply = worker.run("infer.ort", {"model": model, **INFER, "io": IO}, {"input:ids": ids, "input:tm": tm})
    assert set(reply.tensors) == {"output:emb", "output:tm_out"}, reply.final
    np.testing.assert_array_equal(reply.tensors["output:emb"], TABLE[ids])
    np.testing.assert_array_equal(reply.tensors["output:tm_out"], np.maximum(tm, 0))  # batch moved back to axis 0
    assert set(reply.value["latencyMs"]) == {"batch1", "batch4"}


@pytest.mark.parametrize("tensors, message", [
    ({"input:ids": np.zeros((2, 4), np.int32), "input:tm": np.zeros((2, 5), np.float32)},
     'input "ids": expected int64 [N, 4], received int32 [2, 4]'),
    ({"input:ids": np.zeros((2, 4), np.int64), "input:tm": np.zeros((2, 6), np.float32)},
     'input "tm": expected float32 [N, 5], received float32 [2, 6]'),
    ({"input:ids": np.zeros((2, 4), np.int64)}, 'input "tm" missing'),
])
def test_a_wrong_or_missing_input_is_refused_naming_it(worker, model, tensors, message):
    env = worker.run("infer.ort", {"model": model, **INFER, "io": IO}, tensors).final
    assert env["code"] == ErrorCode.SHAPE_MISMATCH, env
    assert message in env["message"], env["message"]
