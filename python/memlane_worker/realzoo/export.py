"""A real-zoo model -> ONNX with torch's legacy exporter (TorchScript, opset 17) or the
dynamo one (torch.export + onnxscript, opset 18), dynamic batch, and dynamic sequence for
text models where the exporter manages it; checked against ONNX Runtime.

The graph is saved as the exporter made it (no op filtering, unlike tasks/onnx_export.py's
zoo export): it is what a user would hand to `memlane compare`.
"""
from __future__ import annotations

import contextlib
import io
import os
import warnings

import numpy as np
import onnx
import torch

from .. import atomic
from .specs import ModelSpec

EXPORTERS = {"legacy": 17, "dynamo": 18}   # exporter -> opset
SAMPLE_BATCH = 3                            # odd: catches a batch size baked into the graph
CHECK_SEED = 1
MAX_SEQ = 128                               # the text models' position tables (text.MAX_POSITIONS)


def _samples(spec: ModelSpec, size: int, batch: int, seq: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [i.generate(rng, batch, seq) for i in spec.inputs(size)]


def _export_legacy(model, args, spec: ModelSpec, size: int, out: str, dynamic_seq: bool) -> None:
    axes = {}
    for i in spec.inputs(size):
        axes[i.name] = {i.batch_axis: "batch", **({i.seq_axis: "seq"} if dynamic_seq and i.seq_axis is not None else {})}
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, out, dynamo=False, opset_version=EXPORTERS["legacy"],
                          input_names=[i.name for i in spec.inputs(size)], output_names=list(spec.outputs),
                          dynamic_axes=axes, do_constant_folding=True)


def _export_dynamo(model, args, spec: ModelSpec, size: int, out: str, dynamic_seq: bool) -> None:
    batch = torch.export.Dim("batch", min=1)
    seq = torch.export.Dim("seq", min=2, max=MAX_SEQ)
    shapes = tuple({i.batch_axis: batch, **({i.seq_axis: seq} if dynamic_seq and i.seq_axis is not None else {})}
                   for i in spec.inputs(size))
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, opset_version=EXPORTERS["dynamo"],
                                    input_names=[i.name for i in spec.inputs(size)], output_names=list(spec.outputs),
                                    dynamic_shapes=shapes, external_data=False, verbose=False)
    onnx.save_model(program.model_proto, out, save_as_external_data=False)


CALIBRATION_BATCH = 8


def lively_init(model: torch.nn.Module, batch) -> None:
    """Random weights that behave like trained ones numerically, so that a relative tolerance
    means something: weights a library zero-initialises (torchvision's ViT head) get
    N(0, 0.02), and BatchNorm running statistics are measured on two random batches instead
    of the identity defaults (with those, mobilenet_v3's logits are ~1e-10). Leaves `model`
    in eval mode."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and not torch.any(p):
                p.normal_(0.0, 0.02)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if norms:
            for m in norms:
                m.reset_running_stats()
                m.momentum = None  # cumulative average over the calibration batches
            model.train()
            for _ in range(2):
                model(*batch())
    model.eval()


def _symbolic_dims(proto: onnx.ModelProto) -> dict[str, list]:
    return {v.name: [d.dim_param if d.HasField("dim_param") else d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in proto.graph.input}


def export(spec: ModelSpec, exporter: str, out: str, *, size: int | None = None, seed: int = 0) -> dict:
    """Writes `out` (atomically) and returns what was made: inputs and outputs with their
    dims as exported, whether the sequence axis stayed dynamic, the ops, ORT's max abs diff
    against torch and each output's scale (max |ORT output|) on generated inputs."""
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {', '.join(EXPORTERS)}, not {exporter!r}")
    size = size or spec.size
    torch.manual_seed(seed)
    model = spec.build(size)
    seq = spec.seq or 1
    lively_init(model, lambda: [torch.from_numpy(a) for a in _samples(spec, size, CALIBRATION_BATCH, seq, seed + 7)])
    args = tuple(torch.from_numpy(a) for a in _samples(spec, size, SAMPLE_BATCH, seq, seed))
    run = _export_legacy if exporter == "legacy" else _export_dynamo
    has_seq = any(i.seq_axis is not None for i in spec.inputs(size))
    seq_note = None
    with atomic.atomic_path(out) as tmp:
        try:
            run(model, args, spec, size, tmp, dynamic_seq=has_seq)
        except Exception as e:  # noqa: BLE001 - any exporter failure: retry with a fixed sequence
            if not has_seq:
                raise
            seq_note = f"dynamic sequence not exported ({type(e).__name__}: {str(e).splitlines()[0][:200]}); fixed at {seq}"
            run(model, args, spec, size, tmp, dynamic_seq=False)
        proto = onnx.load(tmp)
    dims = _symbolic_dims(proto)
    diff, scales = check_against_ort(model, out, spec, size, seq)
    dynamic_seq = has_seq and any(isinstance(d, str) and d and d != dims[i.name][i.batch_axis]
                                  for i in spec.inputs(size) for d in dims[i.name])
    if dynamic_seq:
        # A symbolic axis in the inputs is a declaration: torch's legacy exporter writes the traced
        # length into Reshape targets (nn.MultiheadAttention's view to [seq, batch * heads, d]),
        # so the graph runs at the export's length only. Trying another length tells.
        failure = fails_at_seq(out, spec, size, 2 * seq + 3)
        if failure is not None:
            dynamic_seq = False
            seq_note = (f"the graph fixes the sequence at {seq} although its inputs declare it symbolic "
                        f"(ONNX Runtime at seq {2 * seq + 3}: {failure})")
    return {
        "name": spec.name, "family": spec.family, "exporter": exporter, "opset": EXPORTERS[exporter],
        "onnx": os.path.abspath(out), "size": size if spec.size else None, "seq": spec.seq or None,
        "dynamicSeq": dynamic_seq,
        "seqNote": seq_note,
        "inputs": [{**i.describe(), "exported": dims[i.name]} for i in spec.inputs(size)],
        "outputs": [{"name": n, "scale": s} for n, s in zip(spec.outputs, scales)],
        "params": sum(p.numel() for p in model.parameters()),
        "ops": sorted({n.op_type for n in proto.graph.node}),
        "maxAbsDiffOrtVsTorch": diff,
    }


def fails_at_seq(path: str, spec: ModelSpec, size: int, seq: int) -> str | None:
    """ONNX Runtime's error (its first line, shortened) running `path` on a batch of 2 at `seq`,
    or None where it runs."""
    import onnxruntime as ort

    feeds = _samples(spec, size, 2, seq, CHECK_SEED)
    so = ort.SessionOptions()
    so.log_severity_level = 4  # the failure is expected here: not on stderr in red
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    try:
        sess.run(None, {i.name: a for i, a in zip(spec.inputs(size), feeds)})
    except Exception as e:  # noqa: BLE001 - any failure at that length is the answer
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return msg if len(msg) <= 300 else f"{msg[:140]} ... {msg[-140:]}"  # the node's name, and the shapes
    return None


def check_against_ort(model, path: str, spec: ModelSpec, size: int, seq: int) -> tuple[float, list[float]]:
    """ORT vs torch on a fresh batch of 2 (another batch size than the export's sample)."""
    import onnxruntime as ort

    feeds = _samples(spec, size, 2, seq, CHECK_SEED)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: a for i, a in zip(spec.inputs(size), feeds)})
    with torch.inference_mode():
        want = model(*(torch.from_numpy(a) for a in feeds))
    want = want if isinstance(want, tuple) else (want,)
    diff = max(float(np.max(np.abs(g - w.numpy()))) for g, w in zip(got, want))
    return diff, [float(np.max(np.abs(g))) for g in got]
