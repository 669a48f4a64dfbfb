"""`python -m memlane_worker.launcher <torch.distributed.run options>`: torch.distributed.run
itself (its `main`, unchanged), tied to the life of the orchestrator that started it.

torch's launcher does not watch its parent: were the orchestrator SIGKILLed, it would keep
its ranks running until their heartbeat timeouts, and restart them. Here the kernel sends it
SIGTERM when its parent dies (PR_SET_PDEATHSIG), which torch.distributed.run handles by
stopping its ranks. Imports only the standard library before handing over to torch.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _bind_to_parent() -> None:
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return  # no prctl (not Linux): the ranks still exit on their heartbeat timeout
    if os.getppid() != parent:  # the parent died before prctl took effect
        sys.exit(f"memlane-launcher: the orchestrator (pid {parent}) is gone; not starting ranks")


def main() -> None:
    _bind_to_parent()
    from torch.distributed.run import main as torch_run
    torch_run()


if __name__ == "__main__":
    main()
