"""The real-architecture zoo (memlane_worker.realzoo): torchvision's definitions load without
its native parts, and a model of each family exports with both exporters, ONNX Runtime
matching torch. The whole zoo runs through `memlane compare` in test/zoo/."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx
import pytest

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def realzoo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlane_worker.realzoo", *args], capture_output=True, text=True,
                          env=ENV, timeout=600)


def test_torchvision_models_load_without_native_parts():
    code = ("from memlane_worker.realzoo import torchvision_loader as t;"
            "m = t.models_module('mobilenetv3').mobilenet_v3_small(weights=None);"
            "import sys; print(type(m).__name__, t.native_parts_loaded(), 'torchvision._C' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["MobileNetV3", "[]", "False"]


def test_list_names_every_family():
    r = realzoo("list")
    names = r.stdout.split()
    assert r.returncode == 0
    for n in ("resnet18", "mobilenet_v2", "densenet121", "vit_small", "bert", "distilbert", "gpt2", "llama", "clip_text", "hf_vit",
              "transformer_encoder_prenorm_sf", "transformer_encoder_postnorm_bf", "lstm"):
        assert n in names


def test_unknown_model_is_a_usage_error(tmp_path):
    r = realzoo("export", "resnet999", "--dir", str(tmp_path))
    assert r.returncode == 2 and "unknown zoo model 'resnet999'" in r.stderr
    assert os.listdir(tmp_path) == []


# one model a family; the zoo suite (test/zoo) exports them all with both exporters
@pytest.mark.parametrize("name,exporter", [("squeezenet1_1", "legacy"), ("bert", "both"),
                                           ("transformer_encoder_postnorm_sf", "both")])
def test_export(tmp_path, name, exporter):
    r = realzoo("export", name, "--exporter", exporter, "--dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    want = ["legacy", "dynamo"] if exporter == "both" else [exporter]
    assert [x["exporter"] for x in recs] == want
    for rec in recs:
        model = onnx.load(rec["onnx"])
        assert model.opset_import[0].version == rec["opset"] == {"legacy": 17, "dynamo": 18}[rec["exporter"]]
        assert [i.name for i in model.graph.input] == [i["name"] for i in rec["inputs"]]
        batch = [i.type.tensor_type.shape.dim[i_spec["dims"].index("batch")]
                 for i, i_spec in zip(model.graph.input, rec["inputs"])]
        assert all(d.dim_param for d in batch), "batch axis must be symbolic"
        assert rec["maxAbsDiffOrtVsTorch"] <= 1e-5 * max(1.0, max(o["scale"] for o in rec["outputs"])), rec
        assert all(o["scale"] > 1e-3 for o in rec["outputs"]), rec  # lively weights, not vanishing outputs
    if name == "bert":
        assert all(r["dynamicSeq"] for r in recs) and [i["dtype"] for i in recs[0]["inputs"]] == ["int64"] * 3
    if name == "transformer_encoder_postnorm_sf":
        # the legacy exporter declares seq symbolic but writes the traced 16 into a Reshape
        legacy = next(r for r in recs if r["exporter"] == "legacy")
        assert legacy["dynamicSeq"] is False and "fixes the sequence at 16" in legacy["seqNote"], legacy
    assert sorted(os.listdir(tmp_path)) == sorted([f"{name}.{e}.onnx" for e in want] + ["manifest.json"])
