"""`python -m memlane_worker --connect ENDPOINT [--name NAME] [--heartbeat-timeout S]`.

Imports only zmq, msgpack and the standard library (plus numpy for the tensor codec):
each task imports its own heavy libraries when it runs.

From the environment (set by the orchestrator, never in argv): MEMLANE_WORKER_KEY, the
per-spawn key proved in the hello (without it the orchestrator refuses this worker), and
MEMLANE_MAX_MESSAGE_BYTES, the run's message size limit (docs/protocol.md, "Trust").
"""
from __future__ import annotations

import argparse
import sys

from .parent_death import bind_to_parent
from .worker import Options, Worker


def parse(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(prog="python -m memlane_worker", description=__doc__.splitlines()[0])
    p.add_argument("--connect", required=True, metavar="ENDPOINT",
                   help="the orchestrator's ROUTER endpoint, e.g. tcp://127.0.0.1:5555 or ipc:///dir/broker.sock")
    p.add_argument("--name", default="python", help="worker name announced in hello (default: python)")
    p.add_argument("--heartbeat-timeout", type=float, default=Options.heartbeat_timeout, metavar="S",
                   help="exit when the orchestrator sends nothing for S seconds (default: %(default)s; 0 = never)")
    p.add_argument("--rank-from-env", action="store_true",
                   help="a rank started by torch.distributed.run: name <NAME>@rank<RANK>, key derived for that rank")
    ns = p.parse_args(argv)
    if "://" not in ns.connect:
        p.error(f"--connect expects a ZeroMQ endpoint such as tcp://127.0.0.1:5555, received {ns.connect!r}")
    if ns.heartbeat_timeout < 0:
        p.error(f"--heartbeat-timeout expects a number >= 0, received {ns.heartbeat_timeout}")
    return Options(endpoint=ns.connect, name=ns.name, heartbeat_timeout=ns.heartbeat_timeout, rank_from_env=ns.rank_from_env)


def main(argv: list[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    if options.rank_from_env:
        # A rank's parent is torch.distributed.run: should it die (even SIGKILLed, which leaves
        # it no time to stop its ranks), the rank goes too instead of being reparented.
        bind_to_parent("memlane-worker (rank)")
    Worker(options).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
