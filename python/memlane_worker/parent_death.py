"""Ties a process to the life of its parent (Linux PR_SET_PDEATHSIG): used by the distributed
launcher (its parent: the orchestrator or `memlane join`) and by each rank (its parent: the
launcher). Imports only the standard library.

The parent to expect comes from the environment (ENV_PARENT_PID), set by whoever started
this process: a getppid() read here, after the fork, could already name the reaper that
adopted it, and the check below would then pass for a dead parent.
"""
from __future__ import annotations

import ctypes
import os
import signal

from .protocol import ENV_PARENT_PID

PR_SET_PDEATHSIG = 1


def expected_parent(environ: dict | os._Environ | None = None) -> int | None:
    """The parent pid the environment names, or None when it names none (started by hand)."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_PARENT_PID)
    if text is None:
        return None
    try:
        pid = int(text)
    except ValueError:
        raise SystemExit(f"memlane: {ENV_PARENT_PID} must be a pid, received {text!r}") from None
    if pid < 1:
        raise SystemExit(f"memlane: {ENV_PARENT_PID} must be a pid, received {text!r}")
    return pid


def bind_to_parent(who: str, sig: int = signal.SIGTERM) -> None:
    """Asks the kernel for `sig` when the parent dies; exits when the parent is already gone."""
    parent = expected_parent()
    if parent is None:
        parent = os.getppid()  # no one said: the best guess left
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        return  # no prctl (not Linux): the ranks still exit on their heartbeat timeout
    if os.getppid() != parent:  # the parent died before prctl took effect (or was never ours)
        raise SystemExit(f"{who}: its parent (pid {parent}) is gone; not starting")
