"""A small byte-level GPT and its data: the Python standard library's own .py files, which
every machine with Python has (no download).

Files are chosen deterministically from a seed: the sorted list of top-level stdlib modules
is shuffled with the seed, the first HELDOUT_FILES go to the held-out set and the next ones
to training, up to TRAIN_BYTES. Held-out windows never overlap training text.

The exported model maps a window of CONTEXT bytes (int64 [B, T]) to the logits of the byte
that follows the window ([B, 256]): the label of a held-out window is the next byte, so the
digits pipeline's accuracy code (argmax vs label) is next-token accuracy unchanged.
Imports torch: import this module only inside a task's `import` phase.
"""
from __future__ import annotations

import math
import os
import random
import sysconfig

import numpy as np
import torch
from torch import nn

CONTEXT = 64
VOCAB = 256
D_MODEL, N_HEAD, N_LAYER = 96, 4, 3
TRAIN_BYTES = 2_000_000
HELDOUT_FILES = 4
HELDOUT_WINDOWS = 512


def stdlib_files() -> list[str]:
    """Top-level .py modules of this interpreter's standard library, sorted by name."""
    root = sysconfig.get_paths()["stdlib"]
    names = sorted(n for n in os.listdir(root) if n.endswith(".py") and os.path.isfile(os.path.join(root, n)))
    if len(names) < HELDOUT_FILES + 4:
        raise RuntimeError(f"only {len(names)} .py files in the standard library at {root}")
    return [os.path.join(root, n) for n in names]


def split_files(seed: int) -> tuple[list[str], list[str]]:
    """(training files, held-out files): disjoint, chosen by `seed`."""
    files = stdlib_files()
    random.Random(seed).shuffle(files)
    heldout = files[:HELDOUT_FILES]
    train, total = [], 0
    for f in files[HELDOUT_FILES:]:
        if total >= TRAIN_BYTES:
            break
        train.append(f)
        total += os.path.getsize(f)
    return train, heldout


def _bytes(files: list[str]) -> np.ndarray:
    return np.frombuffer(b"\n".join(open(f, "rb").read() for f in files), dtype=np.uint8).copy()


def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(training bytes uint8 [n], held-out windows int64 [W, CONTEXT], their next bytes int64 [W], info)."""
    train_files, held_files = split_files(seed)
    train = _bytes(train_files)
    held = _bytes(held_files)
    starts = np.random.default_rng(seed).choice(len(held) - CONTEXT - 1, HELDOUT_WINDOWS, replace=False)
    starts.sort()
    x = np.stack([held[s:s + CONTEXT] for s in starts]).astype(np.int64)
    y = held[starts + CONTEXT].astype(np.int64)
    info = {"trainFiles": [os.path.basename(f) for f in train_files], "heldoutFiles": [os.path.basename(f) for f in held_files],
            "trainBytes": int(len(train)), "heldoutBytes": int(len(held))}
    return train, x, y, info


def batches(data: np.ndarray, batch: int, gen: torch.Generator):
    """Endless random (x, y) windows: y is x shifted by one byte (every position trains)."""
    t = torch.from_numpy(data.astype(np.int64))
    while True:
        idx = torch.randint(0, len(t) - CONTEXT - 1, (batch,), generator=gen)
        rows = torch.stack([t[i:i + CONTEXT + 1] for i in idx.tolist()])
        yield rows[:, :-1], rows[:, 1:]


class Block(nn.Module):
    """Pre-norm transformer block with causal self-attention written out (MatMul, additive
    mask, Softmax): the graph every runtime gets is the textbook one. Windows are always
    CONTEXT long, so the mask and the position table are used whole (no Slice on run-time
    shapes), and q, k, v are three Linears (no Split/unbind)."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.q, self.k, self.v = (nn.Linear(D_MODEL, D_MODEL) for _ in range(3))
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))
        mask = torch.full((CONTEXT, CONTEXT), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, CONTEXT, N_HEAD, D_MODEL // N_HEAD).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        q, k, v = self._heads(self.q(h)), self._heads(self.k(h)), self._heads(self.v(h))
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D_MODEL // N_HEAD)) + self.mask
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(-1, CONTEXT, D_MODEL)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.zeros(1, CONTEXT, D_MODEL))
        nn.init.normal_(self.pos, std=0.02)
        self.blocks = nn.Sequential(*(Block() for _ in range(N_LAYER)))
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """idx int64 [B, CONTEXT] (always the full window)."""
        return self.ln(self.blocks(self.tok(idx) + self.pos))

    def logits_all(self, idx: torch.Tensor) -> torch.Tensor:
        """[B, T, 256]: every position's next-byte logits (training)."""
        return self.head(self.hidden(idx))

    def forward(self, idx: torch.Tensor, all_positions: bool = False) -> torch.Tensor:
        """[B, 256]: the logits of the byte after the window (deployment); with
        `all_positions`, logits_all (distributed training: DDP and FSDP act in __call__)."""
        if all_positions:
            return self.logits_all(idx)
        return self.head(self.hidden(idx)[:, -1])
