"""The task catalogue: task name -> module that implements it (docs/worker-tasks.md).

Modules are imported only when a task of theirs arrives, and each task imports its heavy
libraries inside its `import` phase, so a worker's footprint is what its tasks need and
an `infer.ort`-only worker never loads torch.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

_MODULES = {
    "train": "train",
    "train.rank": "train_rank",
    "export": "export",
    "zoo.export": "zoo_export",
    "zoo.checkpoint": "zoo_checkpoint",
    "infer.torch": "infer_torch",
    "infer.ort": "infer_ort",
    "checkpoint.load": "checkpoint_load",
    "worker.info": "worker_info",
    "estimate.torch": "estimate_torch",
    "estimate.ortLoad": "estimate_ort",
    "estimate.faultWindow": "estimate_fault",
}

TASK_NAMES = tuple(_MODULES)


def resolve_name(name: str) -> str | None:
    """The module name of a task, or None for an unknown task (imports nothing)."""
    return _MODULES.get(name)


def resolve(name: str) -> Callable[[Any], Any] | None:
    """The `run(ctx)` function of a task, or None for an unknown task."""
    module = _MODULES.get(name)
    if module is None:
        return None
    return importlib.import_module(f"{__name__}.{module}").run
