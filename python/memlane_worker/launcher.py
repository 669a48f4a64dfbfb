"""`python -m memlane_worker.launcher <torch.distributed.run options>`: torch.distributed.run
itself (its `main`, unchanged), tied to the life of the orchestrator that started it.

torch's launcher does not watch its parent: were the orchestrator SIGKILLed, it would keep
its ranks running until their heartbeat timeouts, and restart them. Here the kernel sends it
SIGTERM when its parent dies (PR_SET_PDEATHSIG), which torch.distributed.run handles by
stopping its ranks. Each rank binds itself to this launcher the same way (memlane_worker
--rank-from-env), so a rank started just before the launcher was SIGKILLed ends too. Imports
only the standard library before handing over to torch.
"""
from __future__ import annotations

import os

from .parent_death import bind_to_parent
from .protocol import ENV_PARENT_PID


def main() -> None:
    bind_to_parent("memlane-launcher")
    # Its ranks inherit this environment: their parent is this launcher (see __main__.py).
    os.environ[ENV_PARENT_PID] = str(os.getpid())
    from torch.distributed.run import main as torch_run
    torch_run()


if __name__ == "__main__":
    main()
