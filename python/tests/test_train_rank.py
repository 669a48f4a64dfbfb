"""`train.rank` end to end on the Python side: python -m torch.distributed.run starts two
ranks of memlane_worker (--rank-from-env); this test plays the orchestrator on a real ROUTER
socket: it admits each rank only on the proof of its derived key, sends each the task, and
checks the results (the TypeScript suite runs the same through the pipeline)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import msgpack
import pytest
import zmq

from memlane_worker import auth
from memlane_worker.protocol import PROTOCOL_VERSION

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, strategy: str, backend: str = "gloo", extra: dict | None = None, timeout=240):
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    stage_key = os.urandom(32)
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT), "MEMLANE_WORKER_KEY": stage_key.hex(),
           "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--rdzv-id", "pytest",
           "--max-restarts", "0", "-m", "memlane_worker", "--rank-from-env",
           "--connect", f"tcp://127.0.0.1:{port}", "--name", "train"]
    launcher = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    results, errors, hellos, phases = {}, {}, {}, {}
    try:
        deadline = time.monotonic() + timeout
        idents, beat = [], time.monotonic()
        while len(results) + len(errors) < 2 and time.monotonic() < deadline:
            if time.monotonic() - beat > 2:  # a worker left without heartbeats exits (orphan guard)
                beat = time.monotonic()
                for i in idents:
                    router.send_multipart([i, msgpack.packb({"v": PROTOCOL_VERSION, "type": "heartbeat", "id": "hb"})])
            if not router.poll(500):
                assert launcher.poll() is None, launcher.stderr.read().decode()[-3000:]
                continue
            ident, raw, *_ = router.recv_multipart()
            m = msgpack.unpackb(raw, raw=False)
            if m["type"] == "hello":
                r = m["rank"]["rank"]
                assert m["worker"] == f"train@rank{r}"
                want = auth.hello_auth(auth.rank_key(stage_key, r), m["id"], m["pid"])
                assert m["auth"] == want, "a rank must prove its own derived key"
                assert auth.hello_auth(stage_key, m["id"], m["pid"]) != m["auth"], "not the stage key itself"
                hellos[r] = m
                idents.append(ident)
                args = {"arch": "digits-cnn", "outDir": str(tmp_path), "epochs": 1, "strategy": strategy, "backend": backend, **(extra or {})}
                router.send_multipart([ident, msgpack.packb({"v": PROTOCOL_VERSION, "type": "task", "id": f"t{r}", "task": "train.rank", "args": args})])
            elif m["type"] == "phase" and m["mark"] == "end":
                phases.setdefault(m["id"], []).append(m["name"])
            elif m["type"] == "result":
                results[m["id"]] = m["value"]
            elif m["type"] == "error":
                errors[m["id"]] = m
            elif m["type"] == "heartbeat":
                pass
    finally:
        launcher.terminate()
        try:
            launcher.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, 9)
            launcher.wait()
        router.close()
    return results, errors, phases


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_gloo_ranks_train_and_rank0_writes_the_checkpoint(tmp_path, strategy):
    results, errors, phases = _run(tmp_path, strategy)
    assert not errors, errors
    by_rank = {v["rank"]: v for v in results.values()}
    assert sorted(by_rank) == [0, 1]
    for r, v in by_rank.items():
        assert v["worldSize"] == 2 and v["backend"] == "gloo" and v["strategy"] == strategy
        assert phases[f"t{r}"] == ["import", "init-process-group", "data-load", "model-wrap", "epoch-1", "checkpoint-save"]
        assert v["accuracy"] > 0.5  # one epoch of 2 ranks
    assert os.path.exists(by_rank[0]["checkpoint"]) and by_rank[1]["checkpoint"] is None
    b0, b1 = by_rank[0]["tensorBytes"], by_rank[1]["tensorBytes"]
    if strategy == "ddp":
        # Adam: exp_avg + exp_avg_sq (+ a 4-byte step a parameter), replicated on each rank
        assert b0 == b1 and 0 <= b0["optimizer"] - 2 * b0["params"] < 1024
    else:
        assert os.path.isdir(by_rank[0]["shardedCheckpoint"]) and not os.path.exists(by_rank[0]["shardedCheckpoint"] + ".tmp")
        assert b0["params"] + b1["params"] >= b0["params"] * 1.5  # each rank holds about half


def test_nccl_without_cuda_is_refused_naming_the_backend(tmp_path):
    pytest.importorskip("torch")
    import torch
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: nccl would run")
    results, errors, _ = _run(tmp_path, "ddp", backend="nccl", timeout=120)
    assert len(errors) == 2 and not results
    for e in errors.values():
        assert "nccl" in e["message"] and "CUDA" in e["message"] and "allowCpuFallback" in e["message"]
