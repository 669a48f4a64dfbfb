"""`train`: fit a zoo model on sklearn's digits, seeded, and write its checkpoint
(.safetensors and a torch.save .pt) plus the held-out set as raw little-endian files.
arch "tiny-gpt" trains a byte-level GPT on stdlib source instead (train_gpt.py)."""
from __future__ import annotations

import os
import time

from ..context import TaskContext
from ..protocol import Phase

DEFAULTS = {"epochs": 12, "seed": 0, "batchSize": 32, "lr": 0.002}


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import torch
        import safetensors.torch  # noqa: F401  (checkpoint-save uses it; its import cost belongs to the import phase)

        from .. import digits, zoo
        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx, zoo.TRAINABLE, default="digits-cnn")
    if arch == "tiny-gpt":
        from . import train_gpt
        return train_gpt.run(ctx, arch, tc)
    epochs = a.int("epochs", DEFAULTS["epochs"], minimum=1)
    seed = a.int("seed", DEFAULTS["seed"], minimum=0)
    batch_size = a.int("batchSize", DEFAULTS["batchSize"], minimum=1)
    lr = a.float("lr", DEFAULTS["lr"], positive=True)
    out_dir = a.path("outDir")
    device = tc.device_arg(ctx)
    tc.init_device(ctx, device)

    with ctx.phase(Phase.DATA_LOAD):
        x_tr, y_tr, x_ho, y_ho = digits.load(seed)
        xt, yt = torch.from_numpy(x_tr).to(device), torch.from_numpy(y_tr).to(device)
        xh, yh = torch.from_numpy(x_ho).to(device), torch.from_numpy(y_ho).to(device)

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)  # shuffling independent of other RNG use
    model = zoo.build(arch).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    accuracy = 0.0
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        with ctx.phase(Phase.epoch(epoch)):
            model.train()
            order = torch.randperm(xt.shape[0], generator=gen).to(device)
            total_loss, correct = 0.0, 0
            for start in range(0, xt.shape[0], batch_size):
                ctx.check_cancel()
                idx = order[start:start + batch_size]
                logits = model(xt[idx])
                loss = loss_fn(logits, yt[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total_loss += loss.item() * idx.shape[0]
                correct += int((logits.argmax(1) == yt[idx]).sum())
            model.eval()
            with torch.inference_mode():
                accuracy = float((model(xh).argmax(1) == yh).float().mean())
        ctx.progress(epoch, epochs, f"epoch {epoch}/{epochs}", {
            "loss": total_loss / xt.shape[0], "trainAccuracy": correct / xt.shape[0], "accuracy": accuracy})
    train_seconds = time.perf_counter() - started
    held = tc.tensor_bytes(model, opt)  # after the last step: its gradients are still there

    with ctx.phase(Phase.CHECKPOINT_SAVE):
        paths = tc.save_training(model, arch, out_dir, x_ho, y_ho)

    return {
        "arch": arch,
        "accuracy": accuracy,
        "epochs": epochs,
        "checkpoint": paths["checkpoint"],
        "checkpointPt": paths["checkpointPt"],
        "heldout": {"inputs": paths["inputs"], "labels": paths["labels"], "shape": list(x_ho.shape)},
        "device": device,
        "params": zoo.param_count(model),
        "trainSeconds": train_seconds,
        "tensorBytes": held,
        "seed": seed,
    }
