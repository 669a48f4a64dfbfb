"""Hands outgoing messages from the task thread to the main thread.

ZeroMQ sockets are not thread-safe, so only the main thread sends. Other threads put
(envelope, frames) on a queue and write one byte to a pipe; the main thread polls the
pipe's read end together with the socket, so a queued message leaves at once rather than
at the next poll timeout.

Envelopes are packed by the thread that puts them: a value msgpack cannot encode then
fails that task (TASK_FAILED) instead of the main loop.
"""
from __future__ import annotations

import os
import queue
from typing import Any

from .messages import pack


class Outbox:
    def __init__(self) -> None:
        self._queue: "queue.Queue[tuple[bytes, list[Any]]]" = queue.Queue()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)  # put() must never block the task thread

    @property
    def fd(self) -> int:
        return self._r

    def put(self, env: dict[str, Any], frames: list[Any]) -> None:
        self._queue.put((pack(env), frames))
        try:
            os.write(self._w, b"\0")
        except BlockingIOError:  # pipe full: the main thread is already due to wake up
            pass

    def drain(self) -> list[tuple[bytes, list[Any]]]:
        """(packed envelope, frames) for every queued message, oldest first."""
        try:
            while os.read(self._r, 4096):
                pass
        except BlockingIOError:
            pass
        items = []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items
