"""The PyTorch estimate's probe (tasks/estimate_torch.py): the live-bytes tracker counts each
storage an op creates once, drops it when its tensor dies, and a view or in-place op adds
nothing; the probe's figures grow with the batch."""
import torch

from memlane_worker.tasks import estimate_torch


def test_tracker_counts_new_storages_once_and_releases_them():
    LiveBytes = estimate_torch._tracker()
    x = torch.ones(1024)  # made before the mode: not counted
    with LiveBytes() as live:
        y = x * 2  # 4 KiB
        assert live.live == 4096
        v = y.view(32, 32)  # a view: same storage
        y.add_(1)  # in place: same storage
        assert live.live == 4096
        z = y + 1  # another 4 KiB
        assert live.peak == 8192
        del y, v
        assert live.live == 4096  # y's storage died with its last tensor
        del z
        assert live.live == 0
        assert live.peak == 8192


def test_probe_grows_with_the_batch_and_backward_holds_more_than_inference():
    fwd2, bwd2 = estimate_torch._probe("mlp", 2, train=True)
    fwd8, bwd8 = estimate_torch._probe("mlp", 8, train=True)
    inf2, _ = estimate_torch._probe("mlp", 2, train=False)
    inf8, _ = estimate_torch._probe("mlp", 8, train=False)
    assert fwd8 > fwd2 > 0 and bwd8 > bwd2 > 0
    assert inf8 > inf2 > 0
    assert bwd2 > inf2  # the backward holds the saved activations and the new gradients


def test_infer_replay_runs_the_benchmarks_calls_and_eval_pass_within_its_caps():
    from memlane_worker import zoo
    from memlane_worker.args import Args

    class Counting(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.batches = []

        def forward(self, x):
            self.batches.append(int(x.shape[0]))
            return self.inner(x)

    def replay(**values):
        model = Counting(zoo.build("mlp").eval())
        peaks = []
        # the current growth: the batch of the call just made, to see which calls were sampled
        now = lambda: float(model.batches[-1])  # noqa: E731
        first, ends = estimate_torch._replay_infer(torch, zoo, "mlp", model, Args("estimate.torch", values),
                                                   lambda: peaks.append(1) or float(len(peaks)), now)
        return model.batches, first, ends

    # warmup 1 + iterations 5 at each batch size, then 20 eval rows in chunks of the largest batch
    batches, first, ends = replay(batchSizes=[1, 8], warmup=1, iterations=5, evalSamples=20)
    assert batches == [1] * 6 + [8] * 6 + [8, 8, 4]
    assert first == 1.0  # the peak growth after the first call alone: python-torch's first-inference
    # sampled after every call at the largest batch and every eval chunk: where the benchmark may end
    assert ends == [8.0] * 6 + [8.0, 8.0, 4.0]
    # capped: REPLAY_CALLS a batch size, REPLAY_CHUNKS chunks of the eval pass
    batches, _, _ = replay(batchSizes=[2], warmup=5, iterations=500, evalSamples=10_000)
    assert batches == [2] * estimate_torch.REPLAY_CALLS + [2] * estimate_torch.REPLAY_CHUNKS


def test_only_run_is_one_draw_of_the_short_run_with_its_samples():
    import pytest

    from memlane_worker.args import Args
    from memlane_worker.errors import TaskError

    class Ctx:  # the task reads only its arguments
        args = Args("estimate.torch", {"arch": "mlp", "run": "infer", "only": "run", "batchSizes": [1, 4],
                                       "warmup": 1, "iterations": 2, "evalSamples": 6})

    r = estimate_torch.run(Ctx())
    assert set(r) == {"arch", "runMiB", "runFirstMiB", "runEndMiB", "runEndSamplesMiB"}
    assert len(r["runEndSamplesMiB"]) == 3 + 2  # three calls at batch 4, two eval chunks
    assert r["runMiB"] >= max(r["runEndSamplesMiB"]) - 1e-9  # the high-water mark is above every sample
    Ctx.args = Args("estimate.torch", {"arch": "mlp", "only": "run"})
    with pytest.raises(TaskError, match="argument 'run' expected \"train\" or \"infer\" with only \"run\""):
        estimate_torch.run(Ctx())
