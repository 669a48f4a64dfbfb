"""parent_death.py: a launcher or rank bound to its parent's death, with the parent to expect
given in the environment (real processes, real SIGKILL)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlane_worker.parent_death import expected_parent
from memlane_worker.protocol import ENV_PARENT_PID

PYTHON_DIR = str(Path(__file__).resolve().parents[1])
BIND = "from memlane_worker.parent_death import bind_to_parent; bind_to_parent('test-child'); print('bound', flush=True)"


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": PYTHON_DIR, **extra}


def test_expected_parent_reads_the_environment():
    assert expected_parent({}) is None
    assert expected_parent({ENV_PARENT_PID: "1234"}) == 1234
    with pytest.raises(SystemExit, match="must be a pid"):
        expected_parent({ENV_PARENT_PID: "abc"})
    with pytest.raises(SystemExit, match="must be a pid"):
        expected_parent({ENV_PARENT_PID: "0"})


def test_a_child_whose_named_parent_is_not_its_parent_refuses_to_start():
    # The named parent is not this child's: as if it had died and the child were adopted.
    other = os.getppid()
    out = subprocess.run([sys.executable, "-c", BIND], env=_env(**{ENV_PARENT_PID: str(other)}), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"its parent (pid {other}) is gone; not starting" in out.stderr
    ok = subprocess.run([sys.executable, "-c", BIND], env=_env(**{ENV_PARENT_PID: str(os.getpid())}), capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.strip() == "bound", ok.stderr


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_a_bound_child_ends_when_its_parent_is_sigkilled():
    child = f"{BIND}; import time; time.sleep(60)"
    middle = (
        "import os, subprocess, sys, time\n"
        f"env = dict(os.environ, {ENV_PARENT_PID}=str(os.getpid()))\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}], env=env, stdout=subprocess.PIPE, text=True)\n"
        "assert p.stdout.readline().strip() == 'bound'\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    m = subprocess.Popen([sys.executable, "-c", middle], env=_env(), stdout=subprocess.PIPE, text=True)
    pid = 0
    try:
        pid = int(m.stdout.readline())
        assert _running(pid)
        m.send_signal(signal.SIGKILL)
        m.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid), "the child outlived its SIGKILLed parent"
    finally:
        m.kill()
        m.wait()
        if pid and _running(pid):
            os.kill(pid, signal.SIGKILL)  # leave nothing behind when the test failed
