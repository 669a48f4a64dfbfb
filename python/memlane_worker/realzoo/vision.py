"""Vision models from torchvision's own definitions (random init, no weights downloaded),
plus a small VisionTransformer configuration. The builders import torch."""
from __future__ import annotations

from .specs import InputSpec, ModelSpec
from .torchvision_loader import models_module

TEST_SIZE = 64      # every classifier below takes 64 px (densenet/regnet end at 2x2)
FULL_SIZE = 224


def image_input(name: str = "input"):
    return lambda size: (InputSpec(name, ("batch", 3, size, size)),)


def _tv(module: str, fn: str, **kwargs):
    def build(size: int):
        return getattr(models_module(module), fn)(weights=None, **kwargs)
    return build


def _vit(size: int):
    # vit_b_16's architecture (conv patch embedding, class token, pre-norm encoder) at a size
    # a CI machine runs in seconds: 2 layers, width 64 instead of 12 and 768.
    vt = models_module("vision_transformer")
    return vt.VisionTransformer(image_size=size, patch_size=16, num_layers=2, num_heads=2,
                                hidden_dim=64, mlp_dim=128, num_classes=1000)


_CLASSIFIERS = {
    "resnet18": ("resnet", "resnet18"),
    "mobilenet_v2": ("mobilenetv2", "mobilenet_v2"),
    "mobilenet_v3_small": ("mobilenetv3", "mobilenet_v3_small"),
    "efficientnet_b0": ("efficientnet", "efficientnet_b0"),
    "squeezenet1_1": ("squeezenet", "squeezenet1_1"),
    "shufflenet_v2_x0_5": ("shufflenetv2", "shufflenet_v2_x0_5"),
    "densenet121": ("densenet", "densenet121"),
    "regnet_x_400mf": ("regnet", "regnet_x_400mf"),
}


def specs() -> list[ModelSpec]:
    out = [ModelSpec(name, "torchvision", _tv(mod, fn), image_input(), ("logits",),
                     size=TEST_SIZE, full_size=FULL_SIZE)
           for name, (mod, fn) in _CLASSIFIERS.items()]
    out.append(ModelSpec("vit_small", "torchvision", _vit, image_input(), ("logits",),
                         size=TEST_SIZE, full_size=FULL_SIZE))
    return out
