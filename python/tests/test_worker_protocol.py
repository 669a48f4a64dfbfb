"""The worker loop against a real ROUTER: hello, heartbeats, errors as data, cancel,
shutdown and exiting on its own when the orchestrator goes away."""
from __future__ import annotations

import subprocess
import sys
import time

import msgpack
import pytest

from harness import Orchestrator
from memlane_worker.protocol import PROTOCOL_VERSION, ErrorCode
from memlane_worker.tasks import TASK_NAMES

V = PROTOCOL_VERSION


def test_hello_comes_first_with_pid_capabilities_and_versions(worker):
    h = worker.hello
    assert h["v"] == V and h["pid"] == worker.proc.pid and h["worker"] == "python"
    assert set(h["capabilities"]) == {*TASK_NAMES, "shm"}  # "shm": it reads shared-memory TensorRefs
    assert {"python", "protocol", "torch", "onnxruntime", "pyzmq"} <= set(h["versions"])


def test_start_up_imports_neither_torch_nor_numpy(worker):
    info = worker.run("worker.info", {}).value
    assert info["pid"] == worker.proc.pid
    assert "torch" not in info["modules"] and "numpy" not in info["modules"]
    assert not [lib for lib in info["sharedLibraries"] if "torch" in lib]


def test_heartbeat_is_echoed(worker):
    worker.send({"v": V, "type": "heartbeat", "id": "hb-1"})
    assert worker.recv(5) == {"v": V, "type": "heartbeat", "id": "hb-1"}


def _expect_error(worker, code, id_=None):
    env = worker.recv(10)
    assert env["type"] == "error" and env["code"] == code, env
    if id_ is not None:
        assert env["id"] == id_
    return env


def test_unknown_type_gets_an_error_and_serving_goes_on(worker):
    worker.send({"v": V, "type": "gossip", "id": "g-1"})
    env = _expect_error(worker, ErrorCode.UNKNOWN_TYPE, "g-1")
    assert "gossip" in env["message"]
    test_heartbeat_is_echoed(worker)


@pytest.mark.parametrize("frame", [
    b"\xc1not msgpack",                                           # invalid msgpack
    msgpack.packb([1, 2, 3]),                                     # not a map
    msgpack.packb({"v": V, "type": "task"}),                      # no id
    msgpack.packb({"v": "1", "type": "task", "id": "x"}),         # v not an integer
])
def test_malformed_envelopes_get_an_error_and_serving_goes_on(worker, frame):
    worker.send_raw(frame)
    _expect_error(worker, ErrorCode.MALFORMED_MESSAGE)
    test_heartbeat_is_echoed(worker)


def test_a_missing_frame_is_malformed(worker):
    worker.send({"v": V, "type": "task", "id": "t-f", "task": "infer.ort", "args": {},
                 "tensors": [{"name": "inputs", "dtype": "float32", "shape": [2], "frame": 0}]})
    env = _expect_error(worker, ErrorCode.MALFORMED_MESSAGE, "t-f")
    assert "frame 0 does not exist" in env["message"]


def test_unknown_task(worker):
    env = worker.run("teleport", {}).final
    assert env["code"] == ErrorCode.UNKNOWN_TASK and "teleport" in env["message"]
    assert env["details"]["capabilities"] == list(TASK_NAMES)


def test_version_mismatch_names_both_versions(worker):
    id_ = worker.send_task("worker.info", {}, v=V + 1)
    env = _expect_error(worker, ErrorCode.VERSION_MISMATCH, id_)
    assert env["message"] == f"orchestrator speaks protocol v{V + 1}, worker speaks v{V}"
    assert env["details"]["orchestrator"] == V + 1 and env["details"]["worker"] == V


def test_invalid_argument_names_task_argument_and_value(worker):
    env = worker.run("infer.ort", {"model": "relative.onnx"}).final
    assert env["code"] == ErrorCode.INVALID_ARGUMENT
    assert env["message"] == "infer.ort: argument 'model' expected an absolute path, received 'relative.onnx'"


def test_exceptions_become_task_failed_with_traceback(worker, tmp_path):
    bad = tmp_path / "not-a-model.onnx"
    bad.write_bytes(b"garbage")
    env = worker.run("infer.ort", {"model": str(bad)}, {"inputs": __import__("numpy").zeros((2, 4), "float32")}).final
    assert env["code"] == ErrorCode.TASK_FAILED and env["message"].startswith("infer.ort failed:")
    assert env["details"]["phase"] == "model-load" and "Traceback" in env["traceback"]


def test_cancel_while_training_and_heartbeats_during_it(worker, tmp_path):
    id_ = worker.send_task("train", {"outDir": str(tmp_path), "epochs": 500})
    while True:  # wait until the task is inside its epochs
        env = worker.recv(60)
        if env["type"] == "phase" and env["name"] == "epoch-1":
            break
    t0 = time.monotonic()
    worker.send({"v": V, "type": "heartbeat", "id": "hb-during"})
    while (env := worker.recv(10))["type"] != "heartbeat":
        assert env["id"] == id_
    assert time.monotonic() - t0 < 2.0  # answered by the main thread, not after the task (2 s: loaded CI)
    worker.send({"v": V, "type": "cancel", "id": id_})
    while (env := worker.recv(10))["type"] in ("phase", "progress"):
        pass
    assert env["type"] == "error" and env["code"] == ErrorCode.CANCELLED and env["id"] == id_, env
    test_heartbeat_is_echoed(worker)


def test_shutdown_exits_0(worker):
    worker.send({"v": V, "type": "shutdown", "id": "s-1"})
    assert worker.proc.wait(10) == 0


def test_exits_on_its_own_when_the_orchestrator_goes_silent():
    o = Orchestrator("--heartbeat-timeout", "1")
    try:
        t0 = time.monotonic()
        assert o.proc.wait(10) == 3
        assert time.monotonic() - t0 < 5
        assert "no message from the orchestrator" in o.proc.stderr.read().decode()
    finally:
        o.close()


def test_bad_command_line_is_refused():
    p = subprocess.run([sys.executable, "-m", "memlane_worker", "--connect", "localhost:1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--connect expects a ZeroMQ endpoint" in p.stderr


def test_cancel_of_a_queued_task_answers_cancelled_without_running_it(worker, tmp_path):
    long_id = worker.send_task("train", {"outDir": str(tmp_path), "epochs": 500})
    queued_id = worker.send_task("worker.info", {})
    worker.send({"v": V, "type": "cancel", "id": queued_id})
    worker.send({"v": V, "type": "cancel", "id": long_id})
    finals = {}
    while len(finals) < 2:
        env = worker.recv(60)
        if env["type"] in ("result", "error"):
            finals[env["id"]] = env
    assert finals[queued_id]["code"] == ErrorCode.CANCELLED
    assert finals[long_id]["code"] == ErrorCode.CANCELLED


def test_inputs_from_a_shared_memory_segment(worker):
    from multiprocessing import shared_memory

    import numpy as np

    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 1, 8, 8) / 128
    seg = shared_memory.SharedMemory(create=True, size=x.nbytes)
    try:
        seg.buf[: x.nbytes] = x.tobytes()
        worker.send({"v": V, "type": "task", "id": "t-shm", "task": "infer.ort", "args": {"model": "/nonexistent.onnx"},
                     "tensors": [{"name": "inputs", "dtype": "float32", "shape": [2, 1, 8, 8],
                                  "shm": {"segment": seg.name, "offset": 0, "length": x.nbytes}}]})
        env = worker.collect("t-shm").final
        # The tensor decoded; the task then refuses the model path: the shm ref itself was fine.
        assert env["code"] == ErrorCode.INVALID_ARGUMENT and "'model'" in env["message"], env
        worker.send({"v": V, "type": "task", "id": "t-shm2", "task": "infer.ort", "args": {},
                     "tensors": [{"name": "inputs", "dtype": "float32", "shape": [2, 1, 8, 8],
                                  "shm": {"segment": seg.name + "-gone", "offset": 0, "length": x.nbytes}}]})
        env = worker.recv(30)
        assert env["code"] == ErrorCode.SHM_UNAVAILABLE and env["id"] == "t-shm2"
    finally:
        seg.close()
        seg.unlink()


def test_an_idle_worker_drops_the_mapping_of_an_unlinked_segment(worker):
    # The mapping cache keeps a segment's pages alive after the orchestrator unlinks it; the
    # worker must let go once idle, or its RSS holds a tensor nobody can name any more.
    from multiprocessing import shared_memory

    import numpy as np

    x = np.ones((4, 1 << 16), dtype=np.float32)
    seg = shared_memory.SharedMemory(create=True, size=x.nbytes)
    try:
        seg.buf[: x.nbytes] = x.tobytes()
        ref = {"name": "big", "dtype": "float32", "shape": list(x.shape),
               "shm": {"segment": seg.name, "offset": 0, "length": x.nbytes}}
        worker.send({"v": V, "type": "task", "id": "t-held", "task": "worker.info", "args": {}, "tensors": [ref]})
        first = worker.collect("t-held").final
        assert first["value"]["tensorsVia"] == {"big": "shm"}
        assert seg.name in first["value"]["shmCached"]
    finally:
        seg.close()
        seg.unlink()
    time.sleep(1.0)  # a few idle poll periods (250 ms each)
    after = worker.run("worker.info", {}).final
    assert after["value"]["shmCached"] == []
