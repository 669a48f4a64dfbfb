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
        grown = []
        first = estimate_torch._replay_infer(torch, zoo, "mlp", model, Args("estimate.torch", values), lambda: grown.append(1) or float(len(grown)))
        return model.batches, first

    # warmup 1 + iterations 5 at each batch size, then 20 eval rows in chunks of the largest batch
    batches, first = replay(batchSizes=[1, 8], warmup=1, iterations=5, evalSamples=20)
    assert batches == [1] * 6 + [8] * 6 + [8, 8, 4]
    assert first == 1.0  # the growth after the first call alone: python-torch's first-inference
    # capped: REPLAY_CALLS a batch size, REPLAY_CHUNKS chunks of the eval pass
    batches, _ = replay(batchSizes=[2], warmup=5, iterations=500, evalSamples=10_000)
    assert batches == [2] * estimate_torch.REPLAY_CALLS + [2] * estimate_torch.REPLAY_CHUNKS
