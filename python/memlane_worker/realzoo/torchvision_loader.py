"""torchvision's model definitions without torchvision's native parts.

torchvision 0.28.0 is the release that pairs with torch 2.13.0, but its wheel is linked
against CUDA: with the CPU build of torch, `import torchvision` fails in
`torchvision._meta_registrations` (its C++ ops such as nms are not registered). The model
definitions themselves (torchvision/models/*.py, ops/misc.py, ops/stochastic_depth.py) are
pure Python. So the installed package is loaded as is, file for file, but its package
`__init__`s that load `_C`/`image.so` (torchvision/__init__.py, ops/__init__.py,
models/__init__.py, which also pulls detection/video models) are replaced by empty package
modules whose `__path__` points at the installed folders. Nothing is copied or patched.

When torchvision has already been imported in full (a CUDA torch it matches), that one is used.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

# The packages whose __init__ loads native code or imports far more than the classifiers.
_HOLLOW_PACKAGES = ("torchvision", "torchvision.ops", "torchvision.models")


def _hollow_package(name: str, folder: str) -> types.ModuleType:
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [folder]
    module = importlib.util.module_from_spec(spec)
    module.__file__ = os.path.join(folder, "__init__.py")
    sys.modules[name] = module
    return module


def _install_hollow_packages() -> None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise ImportError("torchvision is not installed: run `npm run bootstrap` "
                          "(pip install --no-deps torchvision==0.28.0)")
    root = os.path.dirname(spec.origin)
    for name in _HOLLOW_PACKAGES:
        rel = name.split(".")[1:]
        _hollow_package(name, os.path.join(root, *rel))
    # efficientnet.py does `from torchvision.ops import StochasticDepth`: the one name the
    # classifiers take from ops/__init__, set on the hollow package from its own module.
    stochastic = importlib.import_module("torchvision.ops.stochastic_depth")
    sys.modules["torchvision.ops"].StochasticDepth = stochastic.StochasticDepth


def ensure_importable() -> None:
    """Makes `torchvision` importable without its native parts. transformers needs this too:
    it sees torchvision's package metadata, imports it, and a failing import turns into
    "Could not import module 'BertModel'"."""
    if "torchvision" not in sys.modules:
        _install_hollow_packages()


def models_module(module: str) -> types.ModuleType:
    """`torchvision.models.<module>` (e.g. "resnet", "vision_transformer")."""
    ensure_importable()
    return importlib.import_module(f"torchvision.models.{module}")


def native_parts_loaded() -> list[str]:
    """Names of torchvision's native modules present in sys.modules (none, with the hollow
    packages): what the tests assert."""
    return sorted(k for k in sys.modules if k.startswith("torchvision") and
                  k.rsplit(".", 1)[-1] in ("_C", "extension", "_meta_registrations", "image"))
