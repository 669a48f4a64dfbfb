"""A real orchestrator stand-in for the tests: a ZeroMQ ROUTER bound on 127.0.0.1 with an
ephemeral port, and a real worker subprocess (`python -m memlane_worker`) connected to it.
No mocks: every test talks the wire protocol to a live worker."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from typing import Any

import msgpack
import numpy as np
import zmq

from memlane_worker import codec
from memlane_worker.protocol import PROTOCOL_VERSION

_ids = itertools.count(1)


class TaskFailed(Exception):
    def __init__(self, env: dict[str, Any]) -> None:
        super().__init__(f"{env.get('code')}: {env.get('message')}\n{env.get('traceback', '')}")
        self.env = env


class Reply:
    """Everything a worker sent for one task: phase marks, progress, and the final message."""

    def __init__(self) -> None:
        self.phases: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {}
        self.tensors: dict[str, np.ndarray] = {}

    @property
    def value(self) -> dict[str, Any]:
        if self.final.get("type") != "result":
            raise TaskFailed(self.final)
        return self.final["value"]

    def phase_names(self) -> list[str]:
        return [p["name"] for p in self.phases if p["mark"] == "start"]


class Orchestrator:
    def __init__(self, *worker_args: str, name: str = "python", env: dict[str, str] | None = None) -> None:
        self.ctx = zmq.Context.instance()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind("tcp://127.0.0.1:*")
        self.endpoint = self.router.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.proc = subprocess.Popen(
            # This stand-in does not ping every second like the real orchestrator, so idle
            # fixture workers must not count its silence as death; one test sets a timeout.
            [sys.executable, "-m", "memlane_worker", "--connect", self.endpoint, "--name", name,
             *(worker_args or ("--heartbeat-timeout", "0"))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
        self.identity = b""
        self.hello = self.recv(timeout=30)
        assert self.hello["type"] == "hello", self.hello

    def recv_raw(self, timeout: float = 60) -> list[bytes]:
        if not self.router.poll(timeout * 1000):
            raise TimeoutError(f"no message from the worker in {timeout}s; stderr:\n{self.stderr_tail()}")
        parts = self.router.recv_multipart()
        self.identity = parts[0]
        return parts[1:]

    def recv(self, timeout: float = 60) -> dict[str, Any]:
        return msgpack.unpackb(self.recv_raw(timeout)[0], raw=False)

    def send_raw(self, *parts: bytes) -> None:
        self.router.send_multipart([self.identity, *parts])

    def send(self, env: dict[str, Any], frames: list[Any] = ()) -> None:
        self.send_raw(msgpack.packb(env, use_bin_type=True), *frames)

    def send_task(self, task: str, args: dict[str, Any], tensors: dict[str, np.ndarray] | None = None,
                  v: int = PROTOCOL_VERSION) -> str:
        id_ = f"t-{next(_ids)}"
        env: dict[str, Any] = {"v": v, "type": "task", "id": id_, "task": task, "args": args}
        refs, frames = codec.encode(tensors or {})
        if refs:
            env["tensors"] = refs
        self.send(env, frames)
        return id_

    def collect(self, id_: str, timeout: float = 120) -> Reply:
        reply = Reply()
        deadline = time.monotonic() + timeout
        while True:
            parts = self.recv_raw(max(0.1, deadline - time.monotonic()))
            env = msgpack.unpackb(parts[0], raw=False)
            assert env["id"] == id_, env
            if env["type"] == "phase":
                reply.phases.append(env)
            elif env["type"] == "progress":
                reply.progress.append(env)
            else:
                reply.final = env
                reply.tensors = codec.decode(env.get("tensors"), [memoryview(p) for p in parts[1:]])
                return reply

    def run(self, task: str, args: dict[str, Any], tensors: dict[str, np.ndarray] | None = None,
            timeout: float = 120) -> Reply:
        return self.collect(self.send_task(task, args, tensors), timeout)

    def stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return "(worker still running)"
        return self.proc.stderr.read().decode(errors="replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send({"v": PROTOCOL_VERSION, "type": "shutdown", "id": "bye"})
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.router.close()
