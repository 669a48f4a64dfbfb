"""Who this worker is when torch.distributed.run started it as one rank of a distributed
train stage (`--rank-from-env`): the launcher's environment names the rank, the stage key
becomes this rank's own key (auth.rank_key), and the hello carries the identity
(`hello.rank`, docs/distributed.md)."""
from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass

# Set by torch.distributed.run for every rank it starts.
_REQUIRED = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class RankIdentity:
    rank: int
    localRank: int  # noqa: N815  (the protocol's field name)
    worldSize: int  # noqa: N815
    host: str
    restart: int

    def as_hello(self) -> dict:
        return asdict(self)


def from_env(environ: os._Environ | dict | None = None) -> RankIdentity:
    env = os.environ if environ is None else environ
    missing = [k for k in _REQUIRED if k not in env]
    if missing:
        raise SystemExit(f"memlane-worker: --rank-from-env needs {', '.join(missing)} in the environment "
                         "(set by python -m torch.distributed.run); it is missing")
    try:
        values = {k: int(env[k]) for k in _REQUIRED}
        restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except ValueError as e:
        raise SystemExit(f"memlane-worker: --rank-from-env: a rank variable is not an integer ({e})") from None
    return RankIdentity(rank=values["RANK"], localRank=values["LOCAL_RANK"], worldSize=values["WORLD_SIZE"],
                        host=socket.gethostname(), restart=restart)


def worker_name(stage: str, identity: RankIdentity) -> str:
    """`<stage>@rank<r>`: the name errors and the report use (the orchestrator expects it)."""
    return f"{stage}@rank{identity.rank}"
