"""Task argument parsing: each task reads its args once, up front, through these helpers,
so a bad argument fails before any work with a message naming the task, the argument,
what was expected and what was received (code INVALID_ARGUMENT)."""
from __future__ import annotations

import os
from typing import Any, Sequence

from .errors import TaskError
from .protocol import ErrorCode

_REQUIRED = object()


class Args:
    def __init__(self, task: str, values: dict[str, Any], prefix: str = "") -> None:
        self.task = task
        self.values = values
        self.prefix = prefix  # "ort." for the options nested under args.ort

    def fail(self, name: str, expected: str, received: Any) -> TaskError:
        name = self.prefix + name
        return TaskError(
            ErrorCode.INVALID_ARGUMENT,
            f"{self.task}: argument '{name}' expected {expected}, received {received!r}",
            {"task": self.task, "argument": name, "expected": expected, "received": repr(received)},
        )

    def _get(self, name: str, default: Any, expected: str) -> Any:
        if name in self.values and self.values[name] is not None:
            return self.values[name]
        if default is _REQUIRED:
            raise self.fail(name, expected, None)
        return default

    def int(self, name: str, default: Any = _REQUIRED, minimum: int | None = None) -> int:
        expected = "an integer" + (f" >= {minimum}" if minimum is not None else "")
        v = self._get(name, default, expected)
        if not isinstance(v, int) or isinstance(v, bool) or (minimum is not None and v < minimum):
            raise self.fail(name, expected, v)
        return v

    def float(self, name: str, default: Any = _REQUIRED, positive: bool = False) -> float:
        expected = "a positive number" if positive else "a number"
        v = self._get(name, default, expected)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or (positive and not v > 0):
            raise self.fail(name, expected, v)
        return float(v)

    def bool(self, name: str, default: Any = _REQUIRED) -> bool:
        v = self._get(name, default, "true or false")
        if not isinstance(v, bool):
            raise self.fail(name, "true or false", v)
        return v

    def str(self, name: str, default: Any = _REQUIRED) -> str:
        v = self._get(name, default, "a non-empty string")
        if not isinstance(v, str) or not v:
            raise self.fail(name, "a non-empty string", v)
        return v

    def choice(self, name: str, choices: Sequence[str], default: Any = _REQUIRED) -> str:
        expected = "one of " + ", ".join(repr(c) for c in choices)
        v = self._get(name, default, expected)
        if v not in choices:
            raise self.fail(name, expected, v)
        return v

    def path(self, name: str, default: Any = _REQUIRED, must_exist: bool = False) -> str:
        v = self._get(name, default, "an absolute path")
        if v is None:
            return v
        if not isinstance(v, str) or not os.path.isabs(v):
            raise self.fail(name, "an absolute path", v)
        if must_exist and not os.path.isfile(v):
            raise self.fail(name, "an existing file", v)
        return v

    def int_list(self, name: str, default: Any = _REQUIRED, minimum: int = 1) -> list[int]:
        expected = f"a non-empty list of integers >= {minimum}"
        v = self._get(name, default, expected)
        if (not isinstance(v, list) or not v
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= minimum for x in v)):
            raise self.fail(name, expected, v)
        return list(v)

    def int_pairs(self, name: str) -> list[tuple[int, int]]:
        expected = "a list of [a, b] pairs of non-negative integers"
        v = self._get(name, _REQUIRED, expected)
        pair = lambda p: isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in p)  # noqa: E731
        if not isinstance(v, list) or not all(pair(p) for p in v):
            raise self.fail(name, expected, v)
        return [(p[0], p[1]) for p in v]

    def map(self, name: str, default: Any = _REQUIRED) -> "Args":
        """A nested map of options, parsed with the same helpers (names become 'outer.inner')."""
        v = self._get(name, default, "a map")
        if not isinstance(v, dict):
            raise self.fail(name, "a map", v)
        return Args(self.task, v, f"{self.prefix}{name}.")
