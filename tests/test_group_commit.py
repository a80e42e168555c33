"""Group commit: writes from many threads at once share a commit, and each caller still gets
its own result or its own error, as if it had written alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from _support import CURATOR, MEMBER, SIBLING, STEWARD, SimClock, day, fact

import memory_lakehouse as ml

EMBEDDER = ml.HashingEmbedder(dim=64)


@pytest.fixture
def store(tmp_path) -> ml.MemoryStore:
    return ml.open(tmp_path / "s", clock=SimClock(day(30)), embedder=EMBEDDER)


def _held_leader(store: ml.MemoryStore) -> tuple[threading.Event, threading.Event]:
    """Make the next commit wait until released: (started, release)."""
    started, release = threading.Event(), threading.Event()
    real = store.writer.commit

    def commit(*args: Any, **kwargs: Any) -> Any:
        if not started.is_set():
            started.set()
            assert release.wait(10)
        return real(*args, **kwargs)

    store.writer.commit = commit  # type: ignore[method-assign]
    return started, release


def _concurrently(store: ml.MemoryStore, calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run the first call as the leader, held in its commit; queue the rest behind it; release."""
    started, release = _held_leader(store)
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except Exception as exc:  # each caller's own outcome
            out[i] = exc

    threads = [threading.Thread(target=run, args=(0,))]
    threads[0].start()
    assert started.wait(10)
    deadline = time.monotonic() + 10
    for i in range(1, len(calls)):
        threads.append(threading.Thread(target=run, args=(i,)))
        threads[-1].start()
        # queued before the next one starts: the group holds the calls in the order given (two
        # threads started in turn can reach the queue in either order)
        while len(store.group_commit._waiting) < i:
            assert time.monotonic() < deadline, "the followers did not queue"
            time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(10)
    return out


def test_writes_that_arrive_during_a_commit_share_the_next_one(store):
    calls = [
        (lambda i=i: store.write(fact(f"customer:c{i}", "plan", f"plan {i}", day(1)), by=STEWARD)) for i in range(6)
    ]
    results = _concurrently(store, calls)
    assert all(isinstance(r, ml.WriteResult) for r in results), results
    assert len({r.record_id for r in results}) == 6
    assert len({r.txn_id for r in results[1:]}) == 1 != len({r.txn_id for r in results})  # the leader's own, then one
    assert store.group_commit.groups == 1 and store.group_commit.grouped_writes == 5
    for i in range(6):  # each caller reads its write back
        assert store.get_fact(f"customer:c{i}", "plan", by=STEWARD).value == f"plan {i}"


def test_writes_in_turn_from_one_thread_are_never_grouped(store):
    for i in range(3):
        store.write(fact(f"customer:c{i}", "plan", "Pro", day(1)), by=STEWARD)
    assert store.group_commit.groups == 0


def test_a_refused_write_in_a_group_fails_its_own_caller_only(store):
    outsider = ml.Principal("eve", ml.Scope("globex"), role="member")
    calls = [
        lambda: store.write(fact("customer:lead", "plan", "Pro", day(1)), by=STEWARD),
        lambda: store.write(fact("customer:a", "plan", "Pro", day(1)), by=CURATOR),
        lambda: store.write(fact("customer:x", "plan", "Pro", day(1), scope=ml.Scope("acme")), by=outsider),
        lambda: store.write(fact("customer:b", "plan", "Team", day(1)), by=MEMBER),
    ]
    results = _concurrently(store, calls)
    assert isinstance(results[2], ml.LakehouseError), results[2]
    for i, subject, reader in ((0, "customer:lead", STEWARD), (1, "customer:a", CURATOR), (3, "customer:b", MEMBER)):
        assert isinstance(results[i], ml.WriteResult), results[i]
        assert store.get_fact(subject, "plan", by=reader).record_id == results[i].record_id
    assert store.get_fact("customer:x", "plan", by=STEWARD) is None


def test_a_write_about_a_forgotten_subject_raises_to_its_caller_in_a_group(store):
    store.write(fact("customer:gone", "plan", "Pro", day(1)), by=STEWARD)
    store.forget("customer:gone", by=STEWARD, reason="erasure request")
    calls = [
        lambda: store.write(fact("customer:lead", "plan", "Pro", day(2)), by=STEWARD),
        lambda: store.write(fact("customer:gone", "plan", "Team", day(1)), by=STEWARD),
        lambda: store.write(fact("customer:kept", "plan", "Team", day(2)), by=STEWARD),
    ]
    results = _concurrently(store, calls)
    assert isinstance(results[1], ml.StaleGeneration), results[1]
    assert isinstance(results[2], ml.WriteResult)
    assert store.get_fact("customer:gone", "plan", by=STEWARD) is None


def test_two_versions_of_one_slot_in_a_group_supersede_as_written_in_turn(store):
    calls = [
        lambda: store.write(fact("customer:lead", "plan", "Pro", day(1)), by=STEWARD),
        lambda: store.write(fact("customer:s", "plan", "Free", day(1)), by=STEWARD),
        lambda: store.write(fact("customer:s", "plan", "Team", day(5)), by=STEWARD),
    ]
    results = _concurrently(store, calls)
    assert [r.action for r in results[1:]] == ["inserted", "superseded"], results
    assert store.get_fact("customer:s", "plan", by=STEWARD).value == "Team"
    assert store.get_fact("customer:s", "plan", by=STEWARD, as_of=None, valid_at=day(2)).value == "Free"


def test_with_group_commit_off_every_write_commits_on_its_own(store):
    store.group_commit.enabled = False
    started, release = _held_leader(store)
    done: list[ml.WriteResult] = []
    first = threading.Thread(
        target=lambda: done.append(store.write(fact("customer:a", "plan", "Pro", day(1)), by=STEWARD))
    )
    first.start()
    assert started.wait(10)
    second = threading.Thread(
        target=lambda: done.append(store.write(fact("customer:b", "plan", "Pro", day(1)), by=SIBLING))
    )
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    assert len(done) == 2 and len({r.txn_id for r in done}) == 2
    assert store.group_commit.groups == 0
