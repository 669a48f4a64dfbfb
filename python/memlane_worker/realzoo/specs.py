"""What a zoo model is fed and what it returns: one InputSpec per graph input, in order.

Dims are ints, or "batch" / "seq" for the axes the export makes dynamic. Generated values
follow issue 9's rules, so that every runtime sees valid data: token ids within the
vocabulary, attention masks all ones, token type ids all zeros, float inputs uniform in
[-1, 1) (what `memlane compare` generates).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

import numpy as np

Dim = Union[int, str]  # an int, or "batch" / "seq"


@dataclass(frozen=True)
class InputSpec:
    name: str
    dims: tuple[Dim, ...]
    dtype: str = "float32"      # "float32" or "int64"
    fill: str = "uniform"       # "uniform" | "ids" | "ones" | "zeros"
    high: int = 0               # ids: values in [0, high)

    @property
    def batch_axis(self) -> int:
        return self.dims.index("batch")

    @property
    def seq_axis(self) -> int | None:
        return self.dims.index("seq") if "seq" in self.dims else None

    def shape(self, batch: int, seq: int) -> tuple[int, ...]:
        return tuple(batch if d == "batch" else seq if d == "seq" else int(d) for d in self.dims)

    def generate(self, rng: np.random.Generator, batch: int, seq: int) -> np.ndarray:
        shape = self.shape(batch, seq)
        if self.fill == "uniform":
            return rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        if self.fill == "ids":
            return rng.integers(0, self.high, shape, dtype=np.int64)
        if self.fill == "ones":
            return np.ones(shape, dtype=np.int64)
        if self.fill == "zeros":
            return np.zeros(shape, dtype=np.int64)
        raise ValueError(f"input {self.name}: unknown fill {self.fill!r}")

    def describe(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "dims": list(self.dims), "fill": self.fill,
                **({"high": self.high} if self.fill == "ids" else {})}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str                                       # "torchvision" | "transformers" | "torch.nn"
    build: Callable[[int], object]                    # image size (0 for text) -> nn.Module
    inputs: Callable[[int], tuple[InputSpec, ...]]    # image size -> graph inputs, in order
    outputs: tuple[str, ...]
    size: int = 0        # image side in the tests (the smallest the net takes comfortably)
    seq: int = 0         # sequence length of the sample used to export and check
    full_size: int = 0   # image side for benchmarks (--full-size): what the net was designed for
