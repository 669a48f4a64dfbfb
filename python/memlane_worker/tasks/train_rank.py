"""`train.rank`: one rank of a distributed training (started by torch.distributed.run, see
docs/distributed.md). The same models, data and defaults as `train`; the ranks split the
data (DistributedSampler for digits, distinct random windows for tiny-gpt) and each uses
batchSize / worldSize samples a step, so a step sees the single-process batch in total and
the gradients DDP or FSDP average over the ranks are the single-process ones.

Phases: import, init-process-group, data-load, model-wrap, epoch-<n>, checkpoint-save.
Rank 0 writes the full checkpoint (atomically, the `train` task's files); with FSDP every
rank also writes its shard through torch.distributed.checkpoint.
"""
from __future__ import annotations

import os
import time

from ..context import TaskContext
from ..protocol import Phase
from . import train as single
from . import train_gpt

STRATEGIES = ("ddp", "fsdp")
BACKENDS = ("gloo", "nccl")


def run(ctx: TaskContext):
    with ctx.phase(Phase.IMPORT):
        import torch
        import torch.distributed as dist
        import safetensors.torch  # noqa: F401

        from .. import digits, rank, tinygpt, zoo
        from . import dist_common as dc
        from . import torch_common as tc

    a = ctx.args
    arch = tc.arch_arg(ctx, zoo.TRAINABLE, default="digits-cnn")
    gpt = arch == "tiny-gpt"
    defaults = train_gpt.DEFAULTS if gpt else single.DEFAULTS
    epochs = a.int("epochs", defaults["epochs"], minimum=1)
    steps_per_epoch = a.int("stepsPerEpoch", train_gpt.DEFAULTS["stepsPerEpoch"], minimum=1) if gpt else None
    seed = a.int("seed", defaults["seed"], minimum=0)
    batch_size = a.int("batchSize", defaults["batchSize"], minimum=1)
    lr = a.float("lr", defaults["lr"], positive=True)
    out_dir = a.path("outDir")
    strategy = a.choice("strategy", STRATEGIES)
    backend, device, note = dc.choose_backend(ctx.task, a.choice("backend", BACKENDS, "gloo"), a.bool("allowCpuFallback", False))
    me = rank.from_env()

    with ctx.phase(Phase.INIT_PROCESS_GROUP):
        dc.init(backend, device)
    try:
        world, r = dist.get_world_size(), dist.get_rank()
        if batch_size % world:
            # The builder refuses this (distributed/options.ts); a direct task call must too.
            raise ValueError(f"batchSize {batch_size} is not a multiple of the {world} ranks")
        local_batch = batch_size // world
        with ctx.phase(Phase.DATA_LOAD):
            if gpt:
                train_bytes, x_ho, y_ho, _info = tinygpt.load(seed)
            else:
                x_tr, y_tr, x_ho, y_ho = digits.load(seed)
                dataset = torch.utils.data.TensorDataset(torch.from_numpy(x_tr), torch.from_numpy(y_tr))
                sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=world, rank=r, shuffle=True, seed=seed)
                loader = torch.utils.data.DataLoader(dataset, batch_size=local_batch, sampler=sampler)
            xh, yh = torch.from_numpy(x_ho).to(device), torch.from_numpy(y_ho).to(device)

        with ctx.phase(Phase.MODEL_WRAP):
            torch.manual_seed(seed)  # the same initial weights on every rank, and as `train`
            model = dc.wrap(zoo.build(arch).to(device), strategy, device)
            if gpt:
                opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
            else:
                opt = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = torch.nn.CrossEntropyLoss()
        if gpt:
            gen = torch.Generator().manual_seed(seed * 1000 + r)  # each rank its own windows
            data = tinygpt.batches(train_bytes, local_batch, gen)
            total_steps = epochs * steps_per_epoch
            sched = torch.optim.lr_scheduler.LambdaLR(opt, train_gpt.schedule(total_steps))
        accuracy = 0.0
        started = time.perf_counter()
        for epoch in range(1, epochs + 1):
            with ctx.phase(Phase.epoch(epoch)):
                model.train()
                total_loss, seen = 0.0, 0
                if gpt:
                    for _ in range(steps_per_epoch):
                        ctx.check_cancel()
                        x, y = (t.to(device) for t in next(data))
                        loss = loss_fn(model(x, all_positions=True).reshape(-1, tinygpt.VOCAB), y.reshape(-1))
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                        opt.step()
                        sched.step()
                        total_loss, seen = total_loss + loss.item(), seen + 1
                else:
                    sampler.set_epoch(epoch)
                    for xb, yb in loader:
                        ctx.check_cancel()
                        xb, yb = xb.to(device), yb.to(device)
                        loss = loss_fn(model(xb), yb)
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        opt.step()
                        total_loss, seen = total_loss + loss.item() * xb.shape[0], seen + xb.shape[0]
                accuracy = _accuracy(torch, model, xh, yh)
            ctx.progress(epoch, epochs, f"epoch {epoch}/{epochs}", {"loss": total_loss / max(1, seen), "accuracy": accuracy})
        train_seconds = time.perf_counter() - started
        # Measured after the last step: the gradients are still there (zero_grad comes first in a step).
        held = dc.tensor_bytes(model, opt)

        with ctx.phase(Phase.CHECKPOINT_SAVE):
            state = dc.full_state(model, strategy)
            paths = tc.save_state(state, arch, out_dir, x_ho, y_ho) if r == 0 else None
            sharded = dc.save_sharded(model, opt, out_dir, arch) if strategy == "fsdp" else None
            dist.barrier()  # rank 0's files exist before any rank reports done
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

    heldout = None
    if paths is not None:
        heldout = {"inputs": paths["inputs"], "labels": paths["labels"], "shape": list(x_ho.shape)}
        if gpt:
            heldout["dtype"] = "int64"
    return {
        "arch": arch, "rank": r, "localRank": me.localRank, "worldSize": world, "host": me.host, "pid": os.getpid(),
        "strategy": strategy, "backend": backend, "device": device, "note": note,
        "accuracy": accuracy, "epochs": epochs, "trainSeconds": train_seconds, "seed": seed,
        "localBatch": local_batch, "tensorBytes": held,
        "checkpoint": paths["checkpoint"] if paths else None,
        "checkpointPt": paths["checkpointPt"] if paths else None,
        "shardedCheckpoint": sharded, "heldout": heldout,
    }


def _accuracy(torch, model, xh, yh) -> float:
    """Held-out accuracy on every rank (FSDP's forward is a collective: all ranks must run it)."""
    model.eval()
    with torch.no_grad():
        return float((model(xh).argmax(1) == yh).float().mean())
