"""`estimate.torch`: the model-dependent terms of a PyTorch memory estimate, from a probe
forward (and backward) at two small batches, never the full run (docs/memory.md).

- parameter and buffer bytes of the zoo model;
- `trainForward` / `trainBackward`: the highest bytes held by tensors created during a
  training step's forward (the saved activations, the logits, the loss) and during its
  backward (what is still saved, the activation gradients, the new parameter gradients),
  at batches 2 and 8, so the caller extrapolates per sample;
- `inference`: the same under `torch.inference_mode()` (nothing saved: only the live
  intermediates), for the eval forward of training and for python-torch's requests;
- `dataMiB`: what loading the training data costs, measured: this process's RSS before and
  after loading it the way `train` does (sklearn's import for digits, the int64 copy of the
  corpus for tiny-gpt), since a loader's libraries are no graph term;
- `distImportMiB` (with `distributed` "ddp" or "fsdp"): the RSS growth of importing what a
  distributed rank imports beyond `train` (torch.distributed, the strategy's wrapper, the
  distributed checkpoint), measured first, before anything else could have pulled it in;
- `run`: the measured RSS growth of a short run at the real sizes, with this machine's
  allocator: `train` = `steps` optimizer steps at `batchSize` then one eval forward over
  `evalSamples` (the peak of a training epoch), `infer` = what python-torch's benchmark runs
  after the model is built: `warmup + iterations` forwards at each of `batchSizes` (at most
  REPLAY_CALLS), then its pass over `evalSamples` in chunks of the largest batch, outputs
  kept and concatenated (at most REPLAY_CHUNKS chunks). Two forwards a batch size measured 8
  MiB less growth than fourteen on tiny-gpt at batch 64 (glibc's heap fragments call by
  call), and the benchmark's end RSS lies below its peak by what its last forwards freed, so
  the run reports its end growth too (`runEndMiB`). glibc keeps what a step freed in its
  arenas and the eval forward's blocks come on top of it, so the live bytes above are a floor
  of what RSS shows (tiny-gpt's epoch holds about 2.9x its tracked live bytes): the run
  measures what they cannot. Run it in a fresh worker: memory an earlier probe freed would be
  reused and hide growth.
- `runEndSamplesMiB` (infer runs): the RSS growth after each call at the largest batch size
  and after each eval chunk, the states a benchmark can end in. Where glibc's heap top lies
  after a call differs call by call and, more, from one fresh process to the next (addresses
  and hash seeds): tiny-gpt at batch 64 ended 34, 51, 82 or 93 MiB above its start in twenty
  fresh processes. The caller pools these samples over several processes (`only: "run"`
  runs this part alone) rather than trusting one end.

Bytes are counted per storage as it is created by an op (a TorchDispatchMode) and released
when the storage's tensor dies, so views and in-place ops count nothing extra.
"""
from __future__ import annotations

import weakref

from ..context import TaskContext
from .. import memory

PROBE_BATCHES = (2, 8)
# The infer run's caps: enough calls for the heap's growth to settle (tiny-gpt's grew by 8 MiB
# from 2 to 14 forwards at batch 64), few enough that a probe stays seconds on a big model.
REPLAY_CALLS = 16
REPLAY_CHUNKS = 16


def _tracker():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class LiveBytes(TorchDispatchMode):
        """Bytes of the storages ops create, live now and at their highest."""

        def __init__(self) -> None:
            super().__init__()
            self.live = 0
            self.peak = 0
            self._sizes: dict[int, int] = {}

        def reset_peak(self) -> None:
            self.peak = self.live

        def _free(self, key: int) -> None:
            self.live -= self._sizes.pop(key, 0)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                s = t.untyped_storage()
                key, n = s.data_ptr(), s.nbytes()
                if n == 0 or key in self._sizes:
                    continue  # a view or an in-place result: its storage is counted already
                self._sizes[key] = n
                self.live += n
                self.peak = max(self.peak, self.live)
                weakref.finalize(t, self._free, key)
            return out

    return LiveBytes


def _probe(arch: str, batch: int, train: bool) -> tuple[int, int]:
    """(peak bytes in the forward, peak bytes in the backward; 0 for inference)."""
    import torch

    from .. import zoo

    LiveBytes = _tracker()
    torch.manual_seed(0)
    model = zoo.build(arch)
    x = torch.as_tensor(zoo.sample_inputs(arch, batch, 0))
    gpt = hasattr(model, "logits_all")
    if not train:
        model.eval()
        with torch.inference_mode(), LiveBytes() as live:
            model(x)
        return live.peak, 0
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss()
    with LiveBytes() as live:
        logits = model.logits_all(x) if gpt else model(x)
        target = torch.zeros(logits.shape[:-1], dtype=torch.int64)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
        forward = live.peak
        live.reset_peak()
        loss.backward()
        backward = live.peak
    return forward, backward


def _dist_import_mib(strategy: str) -> float:
    """RSS growth of the imports of a distributed rank (tasks/dist_common.py), MiB."""
    before = memory.read()["rssKiB"]
    import torch.distributed  # noqa: F401
    import torch.distributed.checkpoint  # noqa: F401
    import torch.distributed.checkpoint.state_dict  # noqa: F401
    if strategy == "ddp":
        import torch.nn.parallel  # noqa: F401
    else:
        import torch.distributed.device_mesh  # noqa: F401
        import torch.distributed.fsdp  # noqa: F401
    return (memory.read()["rssKiB"] - before) / 1024


def _data_mib(source: str, seed: int) -> float:
    """RSS growth of loading `source` as `train` does, MiB."""
    import torch

    before = memory.read()["rssKiB"]
    keep = []
    if source == "digits":
        from .. import digits
        keep.extend(torch.from_numpy(a) for a in digits.load(seed))
    elif source == "tinygpt":
        from .. import tinygpt
        train, x, y, _ = tinygpt.load(seed)
        keep.extend([train, x, y, next(tinygpt.batches(train, 1, torch.Generator().manual_seed(seed)))])
    after = memory.read()["rssKiB"]
    del keep
    return (after - before) / 1024


def _replay_infer(torch, zoo, arch: str, model, a, peak_growth, growth) -> tuple[float, list[float]]:
    """python-torch's benchmark (tasks/infer_torch.py, timing.py) replayed on generated inputs;
    returns the peak growth after the first call (its first-inference) and the growth after
    each call at the largest batch size and each eval chunk (where the benchmark may end)."""
    import numpy as np

    batch_sizes = a.int_list("batchSizes", [1, 64])
    calls = min(REPLAY_CALLS, max(2, a.int("warmup", 1, minimum=0) + a.int("iterations", 1, minimum=1)))
    chunk = max(batch_sizes)
    first = None
    ends: list[float] = []
    for b in batch_sizes:
        x = torch.as_tensor(zoo.sample_inputs(arch, b, 0))
        for _ in range(calls):
            with torch.inference_mode():
                model(x)
            if first is None:  # python-torch's first-inference is one call at the first batch size
                first = peak_growth()
            if b == chunk:
                ends.append(growth())
    rows = min(a.int("evalSamples", 0, minimum=0), chunk * REPLAY_CHUNKS)
    outs = []
    for start in range(0, rows, chunk):
        x = torch.as_tensor(zoo.sample_inputs(arch, min(chunk, rows - start), start))
        with torch.inference_mode():
            outs.append(np.asarray(model(x).float().cpu().numpy(), dtype=np.float32))
        ends.append(growth())
    if outs:
        np.concatenate(outs)
    return first, ends


def _run_growth(arch: str, mode: str, a, opt_name: str) -> tuple[float, float | None, float, list[float] | None]:
    """Highest RSS above the start of the run, MiB (HWM reset at its start); for `infer` also
    the highest after the first call (else None); the RSS growth at the run's end; and for
    `infer` the growth after each call that could be the benchmark's last (else None)."""
    import torch

    from .. import zoo

    torch.manual_seed(0)
    base = memory.read()["rssKiB"]
    memory.reset_peak()
    model = zoo.build(arch)
    gpt = hasattr(model, "logits_all")
    first = ends = None
    if mode == "infer":
        model.eval()
        first, ends = _replay_infer(torch, zoo, arch, model, a,
                                    lambda: (max(memory.read()["hwmKiB"], base) - base) / 1024,
                                    lambda: (memory.read()["rssKiB"] - base) / 1024)
    else:
        batch = a.int("batchSize", 32, minimum=1)
        opt = (torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01) if opt_name == "adamw"
               else torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9) if opt_name == "sgd-momentum"
               else torch.optim.SGD(model.parameters(), lr=1e-3) if opt_name == "sgd"
               else torch.optim.Adam(model.parameters(), lr=1e-3))
        loss_fn = torch.nn.CrossEntropyLoss()
        model.train()
        for step in range(a.int("steps", 3, minimum=1)):
            x = torch.as_tensor(zoo.sample_inputs(arch, batch, step))
            logits = model.logits_all(x) if gpt else model(x)
            target = torch.zeros(logits.shape[:-1], dtype=torch.int64)
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        x = torch.as_tensor(zoo.sample_inputs(arch, a.int("evalSamples", 1, minimum=1), 0))
        with torch.inference_mode():
            model(x)
    end = memory.read()
    return (max(end["hwmKiB"], base) - base) / 1024, first, (end["rssKiB"] - base) / 1024, ends


def run(ctx: TaskContext):
    import torch

    from .. import zoo

    a = ctx.args
    arch = a.choice("arch", tuple(zoo.names()))
    data = a.choice("data", ("none", "digits", "tinygpt"), "none")
    mode = a.choice("run", ("none", "train", "infer"), "none")
    opt_name = a.choice("optimizer", ("adam", "adamw", "sgd", "sgd-momentum"), "adam")
    strategy = a.choice("distributed", ("none", "ddp", "fsdp"), "none")
    only = a.choice("only", ("all", "run"), "all")
    torch.set_num_threads(a.int("threads", 1, minimum=1))
    if only == "run" and mode == "none":
        raise a.fail("run", '"train" or "infer" with only "run"', mode)
    dist_import_mib = None if strategy == "none" else _dist_import_mib(strategy)
    # First: the probes below free memory that a later load would reuse without growing RSS.
    # Before the run, as `train` loads its data before its steps: the run reuses what the load freed.
    data_mib = _data_mib(data, a.int("seed", 0, minimum=0))
    run_mib, run_first_mib, run_end_mib, ends = (None, None, None, None) if mode == "none" else _run_growth(arch, mode, a, opt_name)
    if only == "run":  # one more draw of the short run, in a fresh process of its own
        return {"arch": arch, "runMiB": run_mib, "runFirstMiB": run_first_mib, "runEndMiB": run_end_mib, "runEndSamplesMiB": ends}
    model = zoo.build(arch)
    params = sum(p.numel() for p in model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())
    del model
    sample = zoo.sample_inputs(arch, 1, 0)
    probes = {"trainForward": [], "trainBackward": [], "inference": []}
    for b in PROBE_BATCHES:
        fwd, bwd = _probe(arch, b, train=True)
        inf, _ = _probe(arch, b, train=False)
        probes["trainForward"].append(fwd)
        probes["trainBackward"].append(bwd)
        probes["inference"].append(inf)
    return {
        "arch": arch,
        "params": params,
        "paramBytes": param_bytes,
        "bufferBytes": buffer_bytes,
        "probeBatches": list(PROBE_BATCHES),
        "probes": probes,
        "inputElements": int(sample.size),
        "inputBytesPerElement": int(sample.itemsize),
        "dataMiB": data_mib,
        "runMiB": run_mib,
        "runFirstMiB": run_first_mib,
        "runEndMiB": run_end_mib,
        "runEndSamplesMiB": ends,
        "distImportMiB": dist_import_mib,
    }
