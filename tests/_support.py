"""Shared helpers for the store tests: a simulated clock, a small scope tree, byte scans.

Fixtures live in ``conftest.py``; Hypothesis tests build their own stores from these
helpers (function-scoped fixtures do not reset between Hypothesis examples).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pyarrow.parquet as pq

import memory_lakehouse as ml

T0 = datetime(2026, 1, 1, tzinfo=UTC)

_T = TypeVar("_T")


def present(found: _T | None) -> _T:
    """*found*, which the test expects a read to have found (``get_fact``, ``get``, a policy).

    Fails with an assertion instead of an AttributeError on None, and tells the type checker so.
    """
    assert found is not None, "the read found nothing"
    return found


def fact_of(record: ml.Envelope) -> ml.Fact:
    """*record*, which the test expects to be a fact (a recall hit, say): typed as one."""
    assert isinstance(record, ml.Fact), record
    return record


def examples(n: int) -> int:
    """Hypothesis example budget; ``MEMLAKE_EXAMPLES_SCALE=10`` runs ten times as many."""
    return n * int(os.environ.get("MEMLAKE_EXAMPLES_SCALE", "1"))


def day(n: float, hours: float = 0) -> datetime:
    """Day *n* of the story (day 0 is 2026-01-01, UTC)."""
    return T0 + timedelta(days=n, hours=hours)


class SimClock:
    """A clock the test moves by hand; the store reads it for each commit's system time."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta | None = None, **kw: float) -> datetime:
        self.now += delta if delta is not None else timedelta(**kw)
        return self.now

    def set(self, when: datetime) -> datetime:
        assert when >= self.now, "the simulated clock only moves forward"
        self.now = when
        return self.now


ORG = ml.Scope("acme")
SUPPORT = ml.Scope("acme", "support")
SALES = ml.Scope("acme", "sales")
TIER1 = ml.Scope("acme", "support", "tier1")
TIER2 = ml.Scope("acme", "support", "tier2")
ALICE = ml.Scope("acme", "support", "tier2", "alice")
BOT = ml.Scope("acme", "support", "tier2", "bot")
BOB = ml.Scope("acme", "support", "tier1", "bob")

STEWARD = ml.Principal("dpo", ORG, role="steward")
CURATOR = ml.Principal("lead", TIER2, role="curator")
MEMBER = ml.Principal("alice", ALICE, role="member")
AGENT = ml.Principal("triage-bot", BOT, role="agent")
SIBLING = ml.Principal("bob", BOB, role="member")


def fact(subject: str, attribute: str, value, valid_from: datetime, **kw) -> ml.Fact:
    kw.setdefault("source", "test@v1")
    return ml.Fact(subject, attribute, value, valid_from, **kw)


def episode(service: str, symptom: str, outcome: str, observed_at: datetime, **kw) -> ml.Episode:
    kw.setdefault("source", "test@v1")
    kw.setdefault("evidence", "https://tracker.example/INC-1")
    return ml.Episode(service, kw.pop("env", "prod"), symptom, kw.pop("action", "restart"), outcome, observed_at, **kw)


def files_under(root: str | Path) -> list[Path]:
    return sorted(p for p in Path(root).rglob("*") if p.is_file())


def snapshot(root: str | Path) -> dict[str, tuple]:
    """Every path under *root* with its size and mtime: equal snapshots mean nothing was touched."""
    root = Path(root)
    out: dict[str, tuple] = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        out[str(p.relative_to(root))] = ("dir" if p.is_dir() else "file", st.st_size, st.st_mtime_ns)
    return out


def parquet_strings(path: Path) -> Iterable[str]:
    """Every value of a parquet file rendered as text (parquet pages may be compressed)."""
    table = pq.read_table(path)
    for column in table.columns:
        for value in column.to_pylist():
            if value is not None:
                yield str(value)


def age_files(paths: Iterable[Path], days: float) -> None:
    """Set the mtime (and atime) of *paths* *days* into the past."""
    past = datetime.now(UTC).timestamp() - days * 86400
    for p in paths:
        os.utime(p, (past, past))


class HandMovedMonotonic:
    """A monotonic clock moved by hand, for a store's ``refresh=`` interval (`objectstore.Freshness`)."""

    def __init__(self, store: ml.MemoryStore) -> None:
        """Take over *store*'s refresh clock; what it asked at open counts as asked at the clock's start."""
        self.now = 1000.0
        freshness = store.lake.freshness
        freshness.clock = self
        for key in list(freshness._probed_at):
            freshness._probed_at[key] = self.now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
