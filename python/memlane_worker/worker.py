"""The worker's main loop: one DEALER socket, owned by the main thread.

The main thread receives, validates and dispatches every message, answers heartbeats at
once, and sends what the task thread queued in the outbox. It exits 0 on `shutdown`, and
on its own (exit code 3) when the orchestrator goes silent for `heartbeat_timeout`
seconds or its parent process dies, so a crashed orchestrator never leaves orphans.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import zmq

from . import auth, messages, rank, shm, tasks, versions
from .errors import MalformedMessage, TaskError
from .executor import Executor, Job
from .outbox import Outbox
from .protocol import PROTOCOL_VERSION, ErrorCode
from .shm import CAPABILITY as SHM_CAPABILITY

EXIT_ORPHANED = 3
_POLL_MS = 250


@dataclass(frozen=True)
class Options:
    endpoint: str
    name: str = "python"
    heartbeat_timeout: float = 30.0  # seconds without any message from the orchestrator; 0 = never
    rank_from_env: bool = False  # a rank started by torch.distributed.run (rank.py)


class Worker:
    def __init__(self, options: Options) -> None:
        self.ctx = zmq.Context.instance()
        self.key = auth.take_key()
        self.rank = rank.from_env() if options.rank_from_env else None
        if self.rank is not None:
            # Every rank got the stage key; each proves its own derived key, so it claims only its slot.
            options = Options(options.endpoint, rank.worker_name(options.name, self.rank), options.heartbeat_timeout, True)
            if self.key is not None:
                self.key = auth.rank_key(self.key, self.rank.rank)
        self.options = options
        self.max_bytes = auth.max_message_bytes()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 2000)  # a final result still leaves if we exit right after
        # libzmq refuses a bigger incoming frame from its header, before allocating it.
        self.sock.setsockopt(zmq.MAXMSGSIZE, self.max_bytes)
        curve = auth.take_curve()
        if curve is not None:
            # A remote broker: the wire is untrusted, so encrypt and pin the server's key.
            self.sock.curve_serverkey = curve.server.encode()
            self.sock.curve_publickey = curve.public.encode()
            self.sock.curve_secretkey = curve.secret.encode()
        self.sock.connect(options.endpoint)
        self.outbox = Outbox()
        self.executor = Executor(self.outbox.put)
        self.last_heard = time.monotonic()
        self.parent = os.getppid()

    # -- sending (main thread only) ---------------------------------------------------
    def _send(self, env: dict[str, Any], frames: list[Any] | None = None) -> None:
        self._send_packed(messages.pack(env), frames or [])

    def _send_packed(self, packed: bytes, frames: list[Any]) -> None:
        """Sends one message, or, when it is over the run's limit (the orchestrator would drop
        our connection for it), a TASK_FAILED error naming the sizes under the same id."""
        size = len(packed) + sum(_nbytes(f) for f in frames)
        if size > self.max_bytes:
            id_ = messages.id_of(packed)
            packed = messages.pack(messages.error(
                id_, ErrorCode.TASK_FAILED,
                f"message of {size} bytes exceeds the limit of {self.max_bytes} bytes "
                "(the run's maxMessageBytes; raise it for bigger tensors)",
                {"bytes": size, "limit": self.max_bytes}))
            frames = []
        self.sock.send_multipart([packed, *frames], copy=False)

    def _error(self, id_: str, code: int, message: str, details: dict[str, Any] | None = None) -> None:
        self._send(messages.error(id_, code, message, details))

    def hello(self) -> None:
        id_, pid = messages.new_id(self.options.name), os.getpid()
        extra = {}
        proof = auth.hello_auth(self.key, id_, pid)
        if proof is not None:
            extra["auth"] = proof
        if self.rank is not None:
            extra["rank"] = self.rank.as_hello()
        self._send(messages.envelope(
            "hello", id_, pid=pid, worker=self.options.name,
            capabilities=[*tasks.TASK_NAMES, SHM_CAPABILITY], versions=versions.collect(), **extra))

    # -- receiving --------------------------------------------------------------------
    def handle(self, parts: list[zmq.Frame]) -> None:
        try:
            env = messages.parse(parts[0].buffer)
        except MalformedMessage as e:
            self._error(e.details.get("id", ""), e.code, e.message, e.details)
            return
        kind, id_ = env["type"], env["id"]
        if env["v"] != PROTOCOL_VERSION:
            self._error(id_, ErrorCode.VERSION_MISMATCH,
                        f"orchestrator speaks protocol v{env['v']}, worker speaks v{PROTOCOL_VERSION}",
                        {"orchestrator": env["v"], "worker": PROTOCOL_VERSION, "type": kind})
            return
        if kind == "heartbeat":
            self._send(messages.envelope("heartbeat", id_))
        elif kind == "task":
            self._task(env, parts[1:])
        elif kind == "cancel":
            self.executor.cancel(id_)  # a finished or unknown task has nothing left to cancel
        elif kind == "shutdown":
            self.exit(0)
        elif kind == "error":
            # The orchestrator refusing us (e.g. VERSION_MISMATCH) is logged; it stops us itself.
            print(f"memlane-worker: orchestrator error {env.get('code')}: {env.get('message')}", file=sys.stderr)
        else:
            self._error(id_, ErrorCode.UNKNOWN_TYPE,
                        f"worker does not accept messages of type {kind!r} "
                        "(accepts task, cancel, heartbeat, shutdown, error)", {"type": kind})

    def _task(self, env: dict[str, Any], frames: list[zmq.Frame]) -> None:
        id_, name = env["id"], env.get("task")
        if not isinstance(name, str):
            self._error(id_, ErrorCode.MALFORMED_MESSAGE, f"task message lacks a string 'task', got {name!r}")
            return
        if tasks.resolve_name(name) is None:
            self._error(id_, ErrorCode.UNKNOWN_TASK,
                        f"unknown task {name!r}; this worker runs {', '.join(tasks.TASK_NAMES)}",
                        {"task": name, "capabilities": list(tasks.TASK_NAMES)})
            return
        args = env.get("args", {})
        if not isinstance(args, dict):
            self._error(id_, ErrorCode.MALFORMED_MESSAGE, f"task {name}: args must be a map, got {type(args).__name__}")
            return
        try:
            tensors = {}
            if env.get("tensors") is not None:
                from . import codec  # numpy loads with the first tensor, not at start-up

                tensors = codec.decode(env["tensors"], frames)
        except TaskError as e:
            self._error(id_, e.code, f"task {name}: {e.message}", e.details)
            return
        self.executor.submit(Job(id_, name, args, tensors))

    # -- loop -------------------------------------------------------------------------
    def exit(self, code: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.sock.close(linger=0 if code == 0 else 500)
        # os._exit: a running task thread (torch, ORT pools) must not keep the process alive.
        os._exit(code)

    def serve(self) -> None:
        self.hello()
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.outbox.fd, zmq.POLLIN)
        while True:
            events = dict(poller.poll(_POLL_MS))
            if self.sock in events:
                self.last_heard = time.monotonic()
                while True:
                    try:
                        parts = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self.handle(parts)
            for packed, frames in self.outbox.drain():
                self._send_packed(packed, frames)
            if not events and self.executor.idle:
                # A cached shm mapping keeps its pages alive after the orchestrator unlinks the
                # segment (at the end of the task that used it): drop it once idle, so an idle
                # worker's RSS does not hold a tensor nobody can name any more. Main thread
                # only: it is the one that decodes refs into the cache.
                shm.release_unlinked()
            self._check_orphaned()

    def _check_orphaned(self) -> None:
        timeout = self.options.heartbeat_timeout
        silent = time.monotonic() - self.last_heard
        if timeout > 0 and silent > timeout:
            print(f"memlane-worker: no message from the orchestrator for {silent:.1f}s "
                  f"(--heartbeat-timeout {timeout}); exiting", file=sys.stderr)
            self.exit(EXIT_ORPHANED)
        if os.getppid() != self.parent:
            print("memlane-worker: parent process exited; exiting", file=sys.stderr)
            self.exit(EXIT_ORPHANED)


def _nbytes(frame: Any) -> int:
    return len(frame) if isinstance(frame, (bytes, bytearray)) else memoryview(frame).nbytes
