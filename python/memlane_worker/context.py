"""What a running task sees: its args and input tensors, phase marks, progress, and the
cancel flag. Tasks run on the executor thread and never touch the socket: everything
they send goes through `send`, which hands the message to the main thread."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import memory
from .args import Args
from .errors import Cancelled
from .messages import envelope

if TYPE_CHECKING:  # numpy is not imported at start-up; see __main__
    import numpy as np

Send = Callable[[dict[str, Any], list[Any]], None]


class TaskContext:
    def __init__(self, task_id: str, task: str, args: dict[str, Any], tensors: dict[str, np.ndarray],
                 send: Send, cancel: threading.Event) -> None:
        self.id = task_id
        self.task = task
        self.args = Args(task, args)
        self.tensors = tensors
        self._send = send
        self._cancel = cancel
        self.phase_name = "start"
        self.failed_phase: str | None = None  # innermost phase an exception escaped from
        self._smaps_sent = False  # the task's first mark carries the baseline summary

    # -- cancellation ---------------------------------------------------------------
    def check_cancel(self) -> None:
        """Long loops call this between steps; a pending cancel ends the task with CANCELLED."""
        if self._cancel.is_set():
            raise Cancelled(self.id, self.phase_name)

    @property
    def where(self) -> str:
        """The phase to blame in an error: where it failed, else the phase running now."""
        return self.failed_phase or self.phase_name

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # -- messages -------------------------------------------------------------------
    def _mark(self, name: str, mark: str) -> None:
        t_ms = time.time() * 1000.0
        fields: dict[str, Any] = {"memory": memory.read()}
        # The per-mapping summary costs ~10-40 ms for a torch process (smaps walks every
        # mapping): only at phase ends, plus once at the task's first mark as the baseline
        # the first phase's growth is measured from (docs/memory.md, "Where the RAM goes").
        if mark == "end" or not self._smaps_sent:
            fields["smaps"] = memory.smaps_summary()
            self._smaps_sent = True
        self._send(envelope("phase", self.id, name=name, mark=mark, tMs=t_ms, **fields), [])

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Marks a phase: resets VmHWM, sends `start`, runs the body, sends `end`.

        `end` is sent even when the body raises, so the orchestrator can close the phase
        and attribute the memory of a failed step to it.
        """
        self.check_cancel()
        memory.reset_peak()
        previous, self.phase_name = self.phase_name, name
        self._mark(name, "start")
        try:
            yield
        except BaseException:
            if self.failed_phase is None:
                self.failed_phase = name
            raise
        finally:
            self._mark(name, "end")
            self.phase_name = previous

    def progress(self, current: int, total: int, label: str, metrics: dict[str, float] | None = None) -> None:
        fields: dict[str, Any] = {"current": current, "total": total, "label": label}
        if metrics:
            fields["metrics"] = {k: float(v) for k, v in metrics.items()}
        self._send(envelope("progress", self.id, **fields), [])

    def tensor(self, name: str) -> np.ndarray:
        """An input tensor the task needs; missing -> INVALID_ARGUMENT naming it."""
        if name not in self.tensors:
            raise self.args.fail(f"tensors.{name}", f"an input tensor named '{name}'",
                                 sorted(self.tensors))
        return self.tensors[name]
