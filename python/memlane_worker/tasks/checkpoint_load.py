"""`checkpoint.load`: load a checkpoint into a zoo model three ways, to compare their RAM.

- `torch.load`: plain. The state dict is read into fresh tensors AND the model allocates its
  own randomly initialised parameters, then load_state_dict copies: about twice the weights.
- `torch.load-mmap`: torch.load(mmap=True) maps the file; the model is built on the meta
  device (no storage) and load_state_dict(assign=True) adopts the mapped tensors: pages are
  file-backed and only read in when touched.
- `safetensors`: safetensors.torch.load_file into a meta-device model with assign=True.
weights_only=True is used throughout: it refuses pickled code (safety), it saves no memory.

`model-load` covers building the module and loading the weights (its peak shows torch.load's
transient second copy). `first-inference` then runs one forward pass at batch 1: with the
mapped methods that is when the weights' pages are read in, so the deferred cost shows there.
"""
from __future__ import annotations

import os

from ..context import TaskContext
from ..protocol import Phase

METHODS = ("torch.load", "torch.load-mmap", "safetensors")


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import torch

        from .. import zoo
        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx)
    path = a.path("checkpoint", must_exist=True)
    method = a.choice("method", METHODS)
    if method == "safetensors" and not path.endswith(".safetensors"):
        raise a.fail("checkpoint", "a .safetensors file for method 'safetensors'", path)
    if method != "safetensors" and path.endswith(".safetensors"):
        raise a.fail("checkpoint", f"a torch.save file (.pt) for method {method!r}", path)

    with ctx.phase(Phase.MODEL_LOAD):
        if method == "torch.load":
            state = torch.load(path, map_location="cpu", weights_only=True)
            model = zoo.build(arch)
            model.load_state_dict(state)
        else:
            if method == "torch.load-mmap":
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            else:
                from safetensors.torch import load_file
                state = load_file(path, device="cpu")
            with torch.device("meta"):
                model = zoo.build(arch)
            model.load_state_dict(state, assign=True)
        model.eval()
        del state  # the model holds what it needs; the reading at the phase end shows that

    with ctx.phase(Phase.FIRST_INFERENCE):
        with torch.inference_mode():
            model(torch.zeros(1, *zoo.input_shape(arch)))

    return {"method": method, "bytes": os.path.getsize(path), "params": zoo.param_count(model), "arch": arch}
