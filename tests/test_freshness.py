"""When a read asks the log for news: once per table per public read, or once per ``refresh=`` interval.

The object-store side (requests counted by the S3 server itself) is in
``tests/test_object_store.py``; these run on a local store, where a probe is a stat().
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from _support import CURATOR, MEMBER, STEWARD, HandMovedMonotonic, SimClock, day, episode, fact, present

import memory_lakehouse as ml
from memory_lakehouse.lake import Lake
from memory_lakehouse.query import tables_for
from memory_lakehouse.records import MEMORY_KINDS


def count_probes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every time a table's log is asked for news (`Lake._refresh_table`), by table."""
    asked: Counter[str] = Counter()
    real = Lake._refresh_table

    def counting(self: Lake, kind: str, force: bool) -> bool:
        asked[kind] += 1
        return real(self, kind, force)

    monkeypatch.setattr(Lake, "_refresh_table", counting)
    return asked


def test_a_public_read_asks_each_table_it_reads_once(tmp_path, monkeypatch):
    clock = SimClock(day(1))
    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    store.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    store.write(ml.Preference("user:1", "tone", "terse", day(0), source="test@v1"), by=CURATOR)
    asked = count_probes(monkeypatch)

    assert present(store.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    assert asked == Counter({"fact": 1})  # not every table, and not twice (basis, then the query)

    asked.clear()
    assert store.recall("plan", by=MEMBER)
    assert asked == Counter({k: 1 for k in tables_for(MEMORY_KINDS)})

    asked.clear()
    store.context("plan", by=MEMBER)  # a read that runs another public read inside it
    assert asked == Counter({k: 1 for k in tables_for(MEMORY_KINDS)})

    asked.clear()
    store.get_fact("user:1", "tone", by=MEMBER, kind="preference")  # its expiry moves with sightings
    assert asked == Counter({"preference": 1, "sighting": 1})


def test_by_default_another_writers_commit_is_visible_to_the_next_read(tmp_path):
    clock = SimClock(day(1))
    reader = ml.open(tmp_path / "store", clock=clock)
    writer = ml.open(tmp_path / "store", clock=clock)
    assert reader.get_fact("user:1", "plan", by=MEMBER) is None
    writer.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    writer.forget("user:1", by=STEWARD, reason="erasure request")
    assert reader.get_fact("user:1", "plan", by=MEMBER) is None  # the ledger is asked on every read too


def test_with_a_refresh_interval_another_writers_commit_shows_once_the_interval_has_passed(tmp_path, monkeypatch):
    clock = SimClock(day(1))
    writer = ml.open(tmp_path / "store", clock=clock)
    writer.write(fact("user:1", "plan", "starter", day(0)), by=CURATOR)
    reader = ml.open(tmp_path / "store", clock=clock, refresh=timedelta(seconds=30))
    ticks = HandMovedMonotonic(reader)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "starter"

    clock.advance(hours=1)
    writer.write(fact("user:1", "plan", "pro", day(1)), by=CURATOR)
    asked = count_probes(monkeypatch)
    ticks.advance(29)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "starter"  # within the interval: stale
    assert asked == Counter()  # and nothing was asked

    ticks.advance(2)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "pro"  # the interval has passed
    assert asked == Counter({"fact": 1})
    asked.clear()
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    assert asked == Counter()


def test_with_a_refresh_interval_a_store_still_reads_its_own_writes_at_once(tmp_path):
    clock = SimClock(day(1))
    store = ml.open(tmp_path / "store", clock=clock, refresh=5.0)
    HandMovedMonotonic(store)  # never moves: every read is within the interval
    assert store.get_fact("user:1", "plan", by=MEMBER) is None
    store.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    assert present(store.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    store.write(episode("checkout", "slow page", "fixed", day(0)), by=CURATOR)
    assert [e.symptom for e in store.episodes(service="checkout", env="prod", by=MEMBER)] == ["slow page"]
    store.forget("user:1", by=STEWARD, reason="erasure request")
    assert store.get_fact("user:1", "plan", by=MEMBER) is None


@pytest.mark.parametrize("bad", [-1, timedelta(seconds=-1), float("nan"), True, "1s"])
def test_a_refresh_interval_must_be_a_non_negative_duration(tmp_path, bad):
    with pytest.raises(ml.ValidationError, match="refresh"):
        ml.open(tmp_path / "store", refresh=bad)
