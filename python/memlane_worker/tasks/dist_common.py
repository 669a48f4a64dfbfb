"""torch.distributed pieces of the `train.rank` task: the backend choice, wrapping the model
in DDP or FSDP, the bytes of parameters, gradients and optimizer state that THIS rank holds
(read from its tensors, a DTensor counted by its local shard), and the checkpoints: rank 0
writes the full state dict atomically; with FSDP every rank also writes its shard through
torch.distributed.checkpoint into a temp directory that rank 0 renames once all are done.

Imports torch at module level: import it only inside a task's `import` phase.
"""
from __future__ import annotations

import os
import shutil
from datetime import timedelta

import torch
import torch.distributed as dist

from ..errors import TaskError
from ..protocol import ErrorCode

# init_process_group gives up after this (the default 10 min would hide a missing rank).
INIT_TIMEOUT = timedelta(seconds=120)


def choose_backend(task: str, backend: str, allow_cpu_fallback: bool) -> tuple[str, str, str | None]:
    """(backend, device, note). NCCL needs CUDA: refused without it unless the user allowed
    the fallback to gloo on the CPU, which the note then says."""
    if backend == "nccl":
        if torch.cuda.is_available():
            local = int(os.environ.get("LOCAL_RANK", "0"))
            return "nccl", f"cuda:{local % torch.cuda.device_count()}", None
        if not allow_cpu_fallback:
            raise TaskError(ErrorCode.BACKEND_UNAVAILABLE,
                            f"{task}: backend 'nccl' needs CUDA, but torch.cuda.is_available() is False "
                            f"(torch {torch.__version__}, CUDA {torch.version.cuda}); use backend 'gloo', "
                            "or allowCpuFallback: true to train with gloo on the CPU",
                            {"backend": "nccl", "torch": torch.__version__})
        return "gloo", "cpu", "nccl requested without CUDA: fell back to gloo on the CPU (allowCpuFallback)"
    return "gloo", "cpu", None


def init(backend: str, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(backend=backend, timeout=INIT_TIMEOUT)


def wrap(model: torch.nn.Module, strategy: str, device: str) -> torch.nn.Module:
    """DDP replicates the model (gradients all-reduced in buckets); FSDP2's fully_shard splits
    every parameter along dim 0 over the ranks (DTensors), gathering them per forward/backward."""
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, device_ids=[torch.device(device).index] if device.startswith("cuda") else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cuda" if device.startswith("cuda") else "cpu", (dist.get_world_size(),))
    # Shard each child with parameters on its own, then the root: parameters of one child are
    # gathered together, and freed after its use (reshard_after_forward).
    for child in model.children():
        if any(True for _ in child.parameters()):
            fully_shard(child, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def tensor_bytes(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of this rank's own parameter, gradient and optimizer-state tensors (torch_common)."""
    from .torch_common import tensor_bytes as measure
    return measure(model, opt)


def full_state(model: torch.nn.Module, strategy: str) -> dict[str, torch.Tensor] | None:
    """The full model state dict on rank 0 (None elsewhere). With FSDP a collective: every rank calls it."""
    if strategy == "ddp":
        return unwrap(model).state_dict() if dist.get_rank() == 0 else None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return state if dist.get_rank() == 0 else None


def save_sharded(model: torch.nn.Module, opt: torch.optim.Optimizer, out_dir: str, arch: str) -> str:
    """FSDP: every rank writes its shards of model and optimizer through
    torch.distributed.checkpoint into `<arch>.dcp.tmp`, then rank 0 renames it to `<arch>.dcp`
    (a reader never sees a half-written checkpoint directory). Returns the final path."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    final = os.path.join(out_dir, f"{arch}.dcp")
    tmp = final + ".tmp"
    if dist.get_rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    dist.barrier()
    model_state, optim_state = get_state_dict(model, opt)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=tmp)
    dist.barrier()
    if dist.get_rank() == 0:
        old = final + ".old"
        if os.path.exists(final):
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return final
