"""The model zoo: every architecture a task can name, built from torch.nn only.

Models are exported to ONNX and compiled by src/compiler/, so each CNN is written to
lower to the op set in docs/plan-format.md: Conv/Linear/BatchNorm/pooling with fixed
kernels (no adaptive pooling, which exports as ReduceMean), and flatten via nn.Flatten.
Imports torch: import this module only inside a task's `import` phase.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn


class DigitsCNN(nn.Module):
    """Small CNN for sklearn's 8x8 digits; reaches > 0.95 held-out accuracy in seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class MLP(nn.Module):
    """Digits-shaped MLP exercising Tanh and Sigmoid (and Gemm after Flatten)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 64), nn.Sigmoid(), nn.Linear(64, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convs with BatchNorm, 1x1 projection when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ResNet with BasicBlocks. Pooling at the end is a fixed-size AvgPool (the input size
    is known), which exports as AveragePool rather than ReduceMean."""

    def __init__(self, widths: list[int], blocks: list[int], stem: str, final_hw: int, classes: int) -> None:
        super().__init__()
        w0 = widths[0]
        if stem == "imagenet":  # 7x7/2 conv + 3x3/2 max pool, as in ResNet-18
            self.stem = nn.Sequential(
                nn.Conv2d(3, w0, 7, 2, 3, bias=False), nn.BatchNorm2d(w0), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
        else:  # CIFAR-style 3x3 stem for 32x32 inputs
            self.stem = nn.Sequential(nn.Conv2d(3, w0, 3, 1, 1, bias=False), nn.BatchNorm2d(w0), nn.ReLU())
        layers: list[nn.Module] = []
        cin = w0
        for i, (w, n) in enumerate(zip(widths, blocks)):
            for j in range(n):
                layers.append(BasicBlock(cin, w, 2 if (j == 0 and i > 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(final_hw)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(cin, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.layers(self.stem(x))))


class GroupedDilated(nn.Module):
    """Grouped and dilated convolutions (and LeakyRelu), for the compiler's Conv paths."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=3, dilation=3, groups=2), nn.LeakyReLU(0.1),
            nn.Conv2d(32, 32, 3, padding=1, groups=32),  # depthwise
            nn.AvgPool2d(8), nn.Flatten(), nn.Linear(32, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class AvgPoolConcat(nn.Module):
    """Two branches joined by Concat, AveragePool with padding, and a Softmax head."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.b = nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), nn.Conv2d(3, 8, 1), nn.Sigmoid())
        self.pool = nn.AvgPool2d(2)  # 16x16 -> 8x8
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 8 * 8, 10), nn.Softmax(dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(torch.cat([self.a(x), self.b(x)], dim=1)))


# name -> (constructor, input shape without the batch dimension)
ZOO: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "digits-cnn": (DigitsCNN, (1, 8, 8)),
    "mlp": (MLP, (1, 8, 8)),
    "resnet-mini": (lambda: ResNet([16, 32, 64], [1, 1, 1], "cifar", 8, 10), (3, 32, 32)),
    "resnet18": (lambda: ResNet([64, 128, 256, 512], [2, 2, 2, 2], "imagenet", 7, 1000), (3, 224, 224)),
    "grouped-dilated": (GroupedDilated, (3, 16, 16)),
    "avgpool-concat": (AvgPoolConcat, (3, 16, 16)),
    # byte-level GPT (tinygpt.py): int64 windows of 64 bytes -> logits of the next byte
    "tiny-gpt": (lambda: _tinygpt().TinyGPT(), (64,)),
}

# Architectures `train` can fit: the digits ones (input [N,1,8,8]) and tiny-gpt (stdlib text).
TRAINABLE = ("digits-cnn", "mlp", "tiny-gpt")

# Input dtype where it is not float32; int64 inputs are byte ids in [0, 256).
INPUT_DTYPES = {"tiny-gpt": "int64"}

# Models whose graph is meant for the transformer ops (LayerNormalization, Gather, ...):
# their export is not held to the CNN op list of plan-format.md.
TRANSFORMERS = ("tiny-gpt",)


def _tinygpt():
    from . import tinygpt
    return tinygpt


def input_dtype(arch: str) -> str:
    return INPUT_DTYPES.get(arch, "float32")


def sample_inputs(arch: str, batch: int, seed: int):
    """A numpy batch the model takes: standard normal floats, or byte ids for int64 inputs."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if input_dtype(arch) == "int64":
        return rng.integers(0, 256, (batch, *input_shape(arch)), dtype=np.int64)
    return rng.standard_normal((batch, *input_shape(arch))).astype(np.float32)


def names() -> list[str]:
    return list(ZOO)


def input_shape(arch: str) -> tuple[int, ...]:
    return ZOO[arch][1]


def build(arch: str) -> nn.Module:
    """A fresh model; weights come from torch's default init (seed beforehand to repeat)."""
    return ZOO[arch][0]()


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
