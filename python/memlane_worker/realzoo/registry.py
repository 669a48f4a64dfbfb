"""Every real-zoo model by name. Cheap: the builders import torch, torchvision's definitions
and transformers when called."""
from __future__ import annotations

from functools import cache

from .specs import ModelSpec


@cache
def models() -> dict[str, ModelSpec]:
    from . import text, vision
    return {m.name: m for m in (*vision.specs(), *text.specs())}


def get(name: str) -> ModelSpec:
    found = models().get(name)
    if found is None:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(models())}")
    return found
