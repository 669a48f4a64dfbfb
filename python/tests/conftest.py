"""Shared fixtures: workers talking to a real ROUTER (see harness.py)."""
from __future__ import annotations

import pytest

from harness import Orchestrator


@pytest.fixture
def worker():
    """A fresh worker per test, on its own ephemeral endpoint."""
    o = Orchestrator()
    yield o
    o.close()


@pytest.fixture(scope="module")
def torch_worker():
    """One worker for a module's torch tasks: torch is imported once, not per test."""
    o = Orchestrator()
    yield o
    o.close()
