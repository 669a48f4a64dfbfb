"""Errors that cross the process boundary as `error` messages ({code, message, details})."""
from __future__ import annotations

from typing import Any

from .protocol import ErrorCode


class TaskError(Exception):
    """A failure with a protocol error code; the worker turns it into an `error` reply."""

    def __init__(self, code: int, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


class Cancelled(TaskError):
    """Raised inside a task when the orchestrator sent `cancel` for it."""

    def __init__(self, task_id: str, where: str) -> None:
        super().__init__(ErrorCode.CANCELLED, f"task {task_id} cancelled during {where}", {"where": where})


class MalformedMessage(TaskError):
    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(ErrorCode.MALFORMED_MESSAGE, message, details)
