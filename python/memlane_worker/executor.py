"""Runs tasks one at a time on a background thread.

Why a thread: the main thread must stay free to answer heartbeats and receive `cancel`
while a long task (training, timed inference) runs. Why one at a time: phase marks reset
the process-wide VmHWM and read process-wide RSS, so two overlapping tasks would blur each
other's figures; queued tasks wait their turn in arrival order.
"""
from __future__ import annotations

import queue
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from . import tasks
from .context import TaskContext
from .errors import Cancelled, TaskError
from .messages import envelope, error
from .protocol import ErrorCode

Send = Callable[[dict[str, Any], list[Any]], None]


@dataclass
class Job:
    id: str
    task: str
    args: dict[str, Any]
    tensors: dict[str, Any]  # name -> numpy array
    cancel: threading.Event = field(default_factory=threading.Event)


class Executor:
    def __init__(self, send: Send) -> None:
        self._send = send
        self._queue: "queue.Queue[Job]" = queue.Queue()
        self._jobs: dict[str, Job] = {}  # queued or running, by task id
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="memlane-task", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._lock:
            self._jobs[job.id] = job
        self._queue.put(job)

    @property
    def idle(self) -> bool:
        """No task queued or running."""
        with self._lock:
            return not self._jobs

    def cancel(self, task_id: str) -> bool:
        """Flags a queued or running task; it answers CANCELLED at its next check."""
        with self._lock:
            job = self._jobs.get(task_id)
        if job is None:
            return False
        job.cancel.set()
        return True

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                self._run(job)
            except BaseException as e:  # the error reply itself failed to encode: send a bare one
                self._send(error(job.id, ErrorCode.TASK_FAILED, f"{job.task} failed and its error could not be "
                                 f"encoded: {type(e).__name__}: {e}"), [])
            finally:
                with self._lock:
                    self._jobs.pop(job.id, None)

    def _run(self, job: Job) -> None:
        ctx = TaskContext(job.id, job.task, job.args, job.tensors, self._send, job.cancel)
        try:
            ctx.check_cancel()  # cancelled while still queued
            run = tasks.resolve(job.task)
            assert run is not None, job.task  # the main thread checked the name
            out = run(ctx)
            value, tensors = out if isinstance(out, tuple) else (out, {})
            fields: dict[str, Any] = {"value": value}
            frames: list[Any] = []
            if tensors:
                from . import codec  # numpy, only once a task has produced tensors anyway

                fields["tensors"], frames = codec.encode(tensors)
            self._send(envelope("result", job.id, **fields), frames)
        except Cancelled as e:
            self._send(error(job.id, e.code, e.message, e.details), [])
        except TaskError as e:
            self._send(error(job.id, e.code, e.message, {"task": job.task, "phase": ctx.where, **e.details},
                             traceback.format_exc()), [])
        except MemoryError as e:
            self._send(error(job.id, ErrorCode.OUT_OF_MEMORY, f"{job.task}: out of host memory: {e}",
                             {"task": job.task, "phase": ctx.where}, traceback.format_exc()), [])
        except BaseException as e:  # anything else is a task failure, never a dead worker
            if type(e).__name__ == "OutOfMemoryError":  # torch.cuda.OutOfMemoryError, without importing torch
                self._send(error(job.id, ErrorCode.OUT_OF_MEMORY, f"{job.task}: out of GPU memory: {e}",
                                 {"task": job.task, "phase": ctx.where}, traceback.format_exc()), [])
                return
            self._send(error(job.id, ErrorCode.TASK_FAILED, f"{job.task} failed: {type(e).__name__}: {e}",
                             {"task": job.task, "phase": ctx.where, "exception": type(e).__name__},
                             traceback.format_exc()), [])
            if not isinstance(e, Exception):
                print(f"memlane-worker: {job.task} raised {type(e).__name__}", file=sys.stderr)
