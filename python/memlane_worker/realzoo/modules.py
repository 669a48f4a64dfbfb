"""torch modules the text zoo wraps models in (imports torch)."""
from __future__ import annotations

import torch
from torch import nn


class Positional(nn.Module):
    """model(**dict(zip(names, inputs))) -> the chosen outputs, as a tuple (up to 3 inputs)."""

    def __init__(self, model: nn.Module, names: tuple[str, ...], outputs: tuple[str, ...]):
        super().__init__()
        self.model, self.names, self.outputs = model, names, outputs

    # Fixed positional parameters rather than *inputs: torch.export matches dynamic_shapes
    # to the parameters, one entry per tensor given.
    def forward(self, x0: torch.Tensor, x1: torch.Tensor | None = None, x2: torch.Tensor | None = None):
        given = [x for x in (x0, x1, x2) if x is not None]
        out = self.model(**dict(zip(self.names, given)), return_dict=True)
        return tuple(out[k] for k in self.outputs)


class LSTMWithStates(nn.Module):
    """Two-layer batch-first LSTM returning the sequence and the final states (h_n and c_n
    are [layers, batch, hidden]: a batch axis that is not the first)."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(32, 64, num_layers=2, batch_first=True)

    def forward(self, x: torch.Tensor):
        out, (h, c) = self.lstm(x)
        return out, h, c
