"""Helpers for the torch-based tasks: argument checks against the zoo, device choice,
and loading a checkpoint (.safetensors or .pt) into a zoo model.

Imports torch at module level: import it only inside a task's `import` phase.
"""
from __future__ import annotations

import os

import torch

from .. import zoo
from ..context import TaskContext
from ..errors import TaskError
from ..protocol import ErrorCode, Phase


def arch_arg(ctx: TaskContext, allowed: tuple[str, ...] | None = None, default=None) -> str:
    if default is None:
        return ctx.args.choice("arch", allowed or tuple(zoo.names()))
    return ctx.args.choice("arch", allowed or tuple(zoo.names()), default)


def device_arg(ctx: TaskContext) -> str:
    """"cpu" / "cuda" / "auto" (default): auto is CUDA when torch can see a GPU."""
    wanted = ctx.args.choice("device", ("cpu", "cuda", "auto"), "auto")
    available = torch.cuda.is_available()
    if wanted == "cuda" and not available:
        raise TaskError(ErrorCode.BACKEND_UNAVAILABLE,
                        f"{ctx.task}: device 'cuda' requested but torch.cuda.is_available() is False "
                        f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})",
                        {"device": "cuda", "torch": torch.__version__})
    return "cuda" if wanted == "cuda" or (wanted == "auto" and available) else "cpu"


def init_device(ctx: TaskContext, device: str) -> None:
    """Creates the CUDA context in its own phase: it costs hundreds of MiB of host RAM that
    would otherwise be charged to whichever phase touches the GPU first."""
    if device == "cuda":
        with ctx.phase(Phase.CUDA_CONTEXT):
            torch.cuda.init()
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()


def load_state_dict(path: str) -> dict[str, torch.Tensor]:
    """A state dict from .safetensors or from a torch.save'd .pt (weights_only: a safety
    switch that refuses pickled code, not a memory saving)."""
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path, device="cpu")
    return torch.load(path, map_location="cpu", weights_only=True)


def load_model(ctx: TaskContext, arch: str, checkpoint: str | None, seed: int) -> torch.nn.Module:
    """A zoo model in eval mode: weights from `checkpoint`, or seeded random weights (the
    same ones zoo.export writes for that seed) when there is none."""
    torch.manual_seed(seed)
    model = zoo.build(arch)
    if checkpoint is not None:
        state = load_state_dict(checkpoint)
        try:
            model.load_state_dict(state)
        except RuntimeError as e:
            raise TaskError(ErrorCode.INVALID_ARGUMENT,
                            f"{ctx.task}: checkpoint {checkpoint} does not fit arch {arch!r}: {e}",
                            {"checkpoint": checkpoint, "arch": arch}) from None
    return model.eval()


def save_training(model: torch.nn.Module, arch: str, out_dir: str, x_ho, y_ho) -> dict[str, str]:
    """The trained checkpoint (safetensors, and torch.save of the same state dict) and the
    held-out set (raw little-endian: inputs in their own kind, int64 or float32; labels int64),
    each written atomically into out_dir. Returns the four paths."""
    return save_state(model.state_dict(), arch, out_dir, x_ho, y_ho)


def save_state(state: dict[str, torch.Tensor], arch: str, out_dir: str, x_ho, y_ho) -> dict[str, str]:
    """save_training from a state dict (a distributed run's rank 0 holds the full one)."""
    from safetensors.torch import save_file

    from .. import atomic

    os.makedirs(out_dir, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    integer_inputs = x_ho.dtype.kind in "iu"
    paths = {
        "checkpoint": os.path.join(out_dir, f"{arch}.safetensors"),
        "checkpointPt": os.path.join(out_dir, f"{arch}.pt"),
        "inputs": os.path.join(out_dir, "heldout-inputs.i64" if integer_inputs else "heldout-inputs.f32"),
        "labels": os.path.join(out_dir, "heldout-labels.i64"),
    }
    with atomic.atomic_path(paths["checkpoint"]) as tmp:
        save_file(state, tmp, metadata={"arch": arch, "producer": "memlane-worker train"})
    with atomic.atomic_path(paths["checkpointPt"]) as tmp:
        torch.save(state, tmp)
    atomic.write_bytes(paths["inputs"], x_ho.astype("<i8" if integer_inputs else "<f4").tobytes())
    atomic.write_bytes(paths["labels"], y_ho.astype("<i8").tobytes())
    return paths


def _local_bytes(t: torch.Tensor | None) -> int:
    if t is None:
        return 0
    local = t.to_local() if hasattr(t, "to_local") else t  # an FSDP DTensor: this process's shard
    return local.numel() * local.element_size()


def tensor_bytes(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of the parameter, gradient and optimizer-state tensors this process holds, read
    from the tensors themselves (a sharded one by its local shard), not from a formula."""
    params = list(model.parameters())
    optimizer = sum(_local_bytes(v) for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor))
    return {
        "params": sum(_local_bytes(p) for p in params),
        "grads": sum(_local_bytes(p.grad) for p in params),
        "optimizer": optimizer,
    }
