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
