"""Fixtures: a fresh store on a simulated clock, and the scope tree's principals (see _support)."""

from __future__ import annotations

import pytest
from _support import SimClock

import memory_lakehouse as ml


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def store(tmp_path, clock) -> ml.MemoryStore:
    return ml.open(tmp_path / "store", clock=clock)
