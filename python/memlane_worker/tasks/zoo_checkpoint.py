"""`zoo.checkpoint`: a zoo model with seeded random weights -> <arch>.pt (torch.save of the
state dict) and <arch>.safetensors, for `checkpoint.load` on checkpoints of a realistic size
(resnet18: ~45 MiB) rather than the few hundred KiB of the trained digits CNN. The weights
are the ones zoo.export and infer.torch build for that seed."""
from __future__ import annotations

import os

from .. import atomic
from ..context import TaskContext
from ..protocol import Phase


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import torch
        from safetensors.torch import save_file

        from .. import zoo
        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx)
    seed = a.int("seed", 0, minimum=0)
    out_dir = a.path("outDir")

    with ctx.phase(Phase.MODEL_LOAD):
        model = tc.load_model(ctx, arch, None, seed)

    with ctx.phase(Phase.CHECKPOINT_SAVE):
        # Contiguous copies with no shared storage: what safetensors requires, and the .pt
        # then holds exactly the same bytes of weights.
        state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
        paths = {"checkpoint": os.path.join(out_dir, f"{arch}.safetensors"),
                 "checkpointPt": os.path.join(out_dir, f"{arch}.pt")}
        with atomic.atomic_path(paths["checkpoint"]) as tmp:
            save_file(state, tmp, metadata={"arch": arch, "seed": str(seed), "producer": "memlane-worker zoo.checkpoint"})
        with atomic.atomic_path(paths["checkpointPt"]) as tmp:
            torch.save(state, tmp)

    return {
        **paths,
        "bytes": {"safetensors": os.path.getsize(paths["checkpoint"]), "pt": os.path.getsize(paths["checkpointPt"])},
        "params": zoo.param_count(model),
        "arch": arch,
        "seed": seed,
    }
