"""`train` with arch "tiny-gpt": a byte-level GPT on the standard library's .py files
(memlane_worker/tinygpt.py). Same result shape as the digits training, with int64 held-out
windows ([n, CONTEXT]) and `heldout.dtype` saying so. An "epoch" here is `stepsPerEpoch`
optimizer steps on random windows (the corpus is 2 MB: a pass over it is not the unit)."""
from __future__ import annotations

import math
import os
import time

from ..context import TaskContext
from ..protocol import Phase

DEFAULTS = {"epochs": 6, "stepsPerEpoch": 250, "seed": 0, "batchSize": 32, "lr": 0.003}
WARMUP_STEPS = 50


def schedule(total_steps: int):
    """The learning-rate factor by step: linear warm-up, then cosine decay to a tenth of lr."""
    return lambda s: min(1.0, (s + 1) / WARMUP_STEPS) * (
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / total_steps)))


def run(ctx: TaskContext, arch: str, tc) -> dict:
    import torch
    import safetensors.torch  # noqa: F401  (checkpoint-save uses it; its import cost belongs to the import phase)

    from .. import tinygpt, zoo

    a = ctx.args
    epochs = a.int("epochs", DEFAULTS["epochs"], minimum=1)
    steps_per_epoch = a.int("stepsPerEpoch", DEFAULTS["stepsPerEpoch"], minimum=1)
    seed = a.int("seed", DEFAULTS["seed"], minimum=0)
    batch_size = a.int("batchSize", DEFAULTS["batchSize"], minimum=1)
    lr = a.float("lr", DEFAULTS["lr"], positive=True)
    out_dir = a.path("outDir")
    device = tc.device_arg(ctx)
    tc.init_device(ctx, device)

    with ctx.phase(Phase.DATA_LOAD):
        train_bytes, x_ho, y_ho, info = tinygpt.load(seed)
        xh, yh = torch.from_numpy(x_ho).to(device), torch.from_numpy(y_ho).to(device)

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = zoo.build(arch).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    total_steps = epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule(total_steps))
    loss_fn = torch.nn.CrossEntropyLoss()
    data = tinygpt.batches(train_bytes, batch_size, gen)
    accuracy = 0.0
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        with ctx.phase(Phase.epoch(epoch)):
            model.train()
            total_loss = 0.0
            for _ in range(steps_per_epoch):
                ctx.check_cancel()
                x, y = (t.to(device) for t in next(data))
                loss = loss_fn(model.logits_all(x).reshape(-1, tinygpt.VOCAB), y.reshape(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                total_loss += loss.item()
            model.eval()
            with torch.inference_mode():
                accuracy = float((model(xh).argmax(1) == yh).float().mean())
        ctx.progress(epoch, epochs, f"epoch {epoch}/{epochs}", {"loss": total_loss / steps_per_epoch, "accuracy": accuracy})
    train_seconds = time.perf_counter() - started
    held = tc.tensor_bytes(model, opt)  # after the last step: its gradients are still there

    with ctx.phase(Phase.CHECKPOINT_SAVE):
        paths = tc.save_training(model, arch, out_dir, x_ho, y_ho)

    return {
        "arch": arch,
        "accuracy": accuracy,
        "epochs": epochs,
        "steps": total_steps,
        "checkpoint": paths["checkpoint"],
        "checkpointPt": paths["checkpointPt"],
        "heldout": {"inputs": paths["inputs"], "labels": paths["labels"], "shape": list(x_ho.shape), "dtype": "int64"},
        "device": device,
        "params": zoo.param_count(model),
        "trainSeconds": train_seconds,
        "tensorBytes": held,
        "seed": seed,
        "data": info,
    }
