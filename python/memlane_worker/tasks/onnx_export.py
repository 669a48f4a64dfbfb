"""torch -> ONNX for the compiler: dynamic batch axis, weights inline, only the ops that
docs/plan-format.md lists, checked against ONNX Runtime.

torch 2.13's default exporter is the dynamo one (torch.export + onnxscript). It is kept:
for the zoo it emits Conv/Gemm/Relu/... with BatchNorm folded into Conv. Its output is
then normalised so the compiler gets a predictable graph: `Constant` nodes become
initializers, and the model is serialised in one file (no external data). Anything left
outside the supported set fails the export with UNSUPPORTED_OP naming the ops.
"""
from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from .. import atomic
from ..errors import TaskError
from ..protocol import ErrorCode

DEFAULT_OPSET = 18  # the dynamo exporter's native opset; 17 works through a version conversion
MIN_OPSET = 17

SUPPORTED_OPS = frozenset({
    "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
    "Erf", "Gelu", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Transpose",
    "Concat", "Softmax", "BatchNormalization", "Identity", "Dropout",
})

INPUT_NAME, OUTPUT_NAME = "input", "output"


def to_onnx(model: torch.nn.Module, sample: torch.Tensor, opset: int, strict_ops: bool = True) -> onnx.ModelProto:
    """The exported, normalised and checked ModelProto (not yet written). `strict_ops`
    refuses ops outside SUPPORTED_OPS (the CNN zoo); transformer models (tiny-gpt) skip it:
    memlane-rt's compiler then names what it lacks, and the other runtimes still run."""
    batch = torch.export.Dim("batch", min=1)
    program = torch.onnx.export(
        model, (sample,), dynamo=True, opset_version=opset, input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME], dynamic_shapes=({0: batch},), external_data=False, verbose=False,
    )
    proto = program.model_proto
    constants_to_initializers(proto)
    if strict_ops:
        check_ops(proto)
    check_dynamic_batch(proto)
    onnx.checker.check_model(proto)
    return proto


def constants_to_initializers(proto: onnx.ModelProto) -> None:
    graph = proto.graph
    keep = []
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


def check_ops(proto: onnx.ModelProto) -> None:
    found = sorted({n.op_type for n in proto.graph.node} - SUPPORTED_OPS)
    if found:
        raise TaskError(ErrorCode.UNSUPPORTED_OP,
                        f"exported graph uses ops outside the supported set: {', '.join(found)}",
                        {"ops": found, "supported": sorted(SUPPORTED_OPS)})


def check_dynamic_batch(proto: onnx.ModelProto) -> None:
    dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    if dim.HasField("dim_value"):
        raise TaskError(ErrorCode.TASK_FAILED, f"exported input has a fixed batch of {dim.dim_value}, not a dynamic axis")


def save(proto: onnx.ModelProto, out: str) -> None:
    """One self-contained file, written atomically (weights inline: < 2 GiB for the zoo)."""
    for init in proto.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            raise TaskError(ErrorCode.TASK_FAILED, f"initializer {init.name} refers to external data")
    with atomic.atomic_path(out) as tmp:
        onnx.save_model(proto, tmp, save_as_external_data=False)


def max_abs_diff_vs_ort(model: torch.nn.Module, proto: onnx.ModelProto, sample: np.ndarray) -> float:
    """ONNX Runtime's output against torch's for the same batch (CPU, all optimisations)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {INPUT_NAME: sample})[0]
    with torch.inference_mode():
        want = model(torch.from_numpy(sample)).numpy()
    return float(np.max(np.abs(got - want)))


def initializer_bytes(proto: onnx.ModelProto) -> int:
    return sum(numpy_helper.to_array(t).nbytes for t in proto.graph.initializer)
