"""When a read asks the log for news: once per table per public read, or once per ``refresh=`` interval;
on a local store only the tables whose logs changed since they were last asked (`logwatch`).

The object-store side (requests counted by the S3 server itself) is in
``tests/test_object_store.py``; these run on a local store, where a probe is a stat().
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import random
import threading
from collections import Counter
from datetime import timedelta

import pytest
from _support import CURATOR, MEMBER, STEWARD, HandMovedMonotonic, SimClock, day, episode, fact, present
from _writers import child_writes

import memory_lakehouse as ml
from memory_lakehouse import logwatch
from memory_lakehouse.forget import Ledger
from memory_lakehouse.lake import Lake
from memory_lakehouse.logwatch import WATCH_ENV
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
    monkeypatch.setenv(WATCH_ENV, "0")  # without the watch over the logs, which spares the tables nothing changed in
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


# ---------------------------------------------------------------- the watch over the logs


def watched_store(path, clock):
    store = ml.open(path, clock=clock, embedder=ml.HashingEmbedder())
    assert store.lake._watch is not None, "inotify on a local file system: the watch is on by default"
    return store


def test_with_the_watch_a_read_asks_only_the_tables_whose_logs_changed_since_they_were_last_asked(
    tmp_path, monkeypatch
):
    clock = SimClock(day(1))
    reader = watched_store(tmp_path / "store", clock)
    writer = watched_store(tmp_path / "store", clock)
    asked = count_probes(monkeypatch)
    assert reader.recall("plan", by=MEMBER) == []
    assert asked == Counter()  # nothing committed since the store opened

    writer.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    asked.clear()
    assert [h.record.value for h in reader.recall("plan", by=MEMBER)] == ["pro"]
    assert asked == Counter({"fact": 1})  # and it took the commit in

    asked.clear()
    writer.write(ml.Preference("user:1", "tone", "terse", day(0), source="test@v1"), by=CURATOR)
    assert asked == Counter({"preference": 1})  # the writer's own append, which it applies as it commits
    asked.clear()
    assert present(reader.get_fact("user:1", "tone", by=MEMBER, kind="preference")).value == "terse"
    assert asked == Counter({"preference": 1})
    asked.clear()
    assert len(reader.recall("plan", by=MEMBER)) == 2
    assert asked == Counter()  # every table asked since its last change


def test_with_the_watch_a_commit_by_another_process_is_visible_to_the_next_read(tmp_path, monkeypatch):
    clock = SimClock(day(1))
    reader = watched_store(tmp_path / "store", clock)
    assert reader.get_fact("child:0", "plan", by=MEMBER) is None
    ctx = mp.get_context("spawn")
    started, out = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=child_writes, args=(str(tmp_path / "store"), 3, day(0), started, out))
    child.start()
    ids = out.get(timeout=300)
    child.join(120)
    assert child.exitcode == 0 and len(ids) == 3
    asked = count_probes(monkeypatch)
    for n in range(3):
        assert present(reader.get_fact(f"child:{n}", "plan", by=MEMBER)).value == f"child plan {n}"
    assert asked == Counter({"fact": 1})  # the first read took all three in; the others asked nothing


def test_with_the_watch_a_table_whose_asking_failed_is_asked_again(tmp_path, monkeypatch):
    clock = SimClock(day(1))
    reader = watched_store(tmp_path / "store", clock)
    writer = watched_store(tmp_path / "store", clock)
    writer.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    real = Lake._refresh_table
    failures: list[str] = []

    def failing_once(self: Lake, kind: str, force: bool) -> bool:
        if self is reader.lake and not failures:
            failures.append(kind)
            raise OSError("the disk went away for a moment")
        return real(self, kind, force)

    monkeypatch.setattr(Lake, "_refresh_table", failing_once)
    with pytest.raises(OSError, match="went away"):
        reader.get_fact("user:1", "plan", by=MEMBER)
    assert failures == ["fact"]
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "pro"  # asked again, not taken as quiet


def test_with_the_watch_an_overflowed_queue_has_every_table_asked(tmp_path, monkeypatch):
    clock = SimClock(day(1))
    store = watched_store(tmp_path / "store", clock)
    store.recall("plan", by=MEMBER)
    asked = count_probes(monkeypatch)
    hub = logwatch._the_hub()
    assert hub is not None
    hub._dispatch(
        logwatch._EVENT.pack(-1, logwatch._IN_Q_OVERFLOW, 0, 0)
    )  # what the kernel queues when events were lost
    store.recall("plan", by=MEMBER)
    assert asked == Counter({k: 1 for k in tables_for(MEMORY_KINDS)})


def test_with_the_watch_a_log_directory_that_went_away_has_its_table_asked_every_time(tmp_path):
    watched, other = tmp_path / "fact" / "_delta_log", tmp_path / "note" / "_delta_log"
    watched.mkdir(parents=True)
    other.mkdir(parents=True)
    watch = logwatch.watch_logs({"fact": str(watched), "note": str(other)})
    assert watch is not None
    assert watch.unchanged_of(["fact", "note"]) == set()  # nothing is known before a first asking
    for table in ("fact", "note"):
        with logwatch.asking(watch, table):
            pass
    assert watch.unchanged_of(["fact", "note"]) == {"fact", "note"}
    (watched / "00000000000000000001.json").write_text("{}")
    assert watch.unchanged_of(["fact", "note"]) == {"note"}  # an entry created in its log
    with logwatch.asking(watch, "fact"):
        pass
    assert watch.unchanged_of(["fact"]) == {"fact"}
    (watched / "00000000000000000001.json").unlink()
    watched.rmdir()
    for _ in range(2):  # gone: no longer watched, so never taken as unchanged again
        with logwatch.asking(watch, "fact"):
            pass
        assert watch.unchanged_of(["fact", "note"]) == {"note"}
    watch.close()
    assert watch.unchanged_of(["note"]) == set()


def test_no_watch_where_it_cannot_see_every_writer(tmp_path, monkeypatch):
    logs = {"fact": str(tmp_path)}
    assert logwatch.watch_logs(logs) is not None
    monkeypatch.setattr(logwatch, "file_system_of", lambda path: "nfs4")  # another host's writes make no event here
    assert logwatch.watch_logs(logs) is None
    monkeypatch.undo()
    monkeypatch.setenv(WATCH_ENV, "0")
    assert logwatch.watch_logs(logs) is None
    assert ml.open(tmp_path / "store").lake._watch is None


def test_a_store_let_go_of_in_the_middle_of_a_drain_does_not_hang_it(tmp_path):
    """A collected store's finalizer closes its watch, and a garbage collection can run it in
    the thread that is draining the queue, with the lock held: it must not wait for it."""
    (tmp_path / "log").mkdir()
    watch = logwatch.watch_logs({"fact": str(tmp_path / "log")})
    assert watch is not None
    hub = logwatch._the_hub()
    assert hub is not None

    def close_inside_a_drain() -> None:
        with hub._lock:
            watch.close()

    closing = threading.Thread(target=close_inside_a_drain, daemon=True)
    closing.start()
    closing.join(30)
    assert not closing.is_alive()
    assert watch.unchanged_of(["fact"]) == set()  # closed: asked every time
    hub.drain()
    assert watch not in hub._watchers  # let go of at the next drain


def test_with_the_watch_the_ledger_is_asked_only_once_its_log_changed(tmp_path, monkeypatch):
    clock = SimClock(day(1))
    reader = watched_store(tmp_path / "store", clock)
    writer = watched_store(tmp_path / "store", clock)
    writer.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    asked: list[Ledger] = []
    real = Ledger._refresh

    def counting(self: Ledger) -> bool:
        asked.append(self)
        return real(self)

    monkeypatch.setattr(Ledger, "_refresh", counting)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    assert asked == []
    writer.forget("user:1", by=STEWARD, reason="erasure request")
    asked.clear()
    assert reader.get_fact("user:1", "plan", by=MEMBER) is None
    assert asked == [reader.ledger]


def _in_a_forked_child(watched: str, other: str, conn) -> None:
    """Entry point of the forked child. No store, and no garbage collection: the parent's
    objects it inherits include deltalake's, whose finalizers crash in a forked child (the
    reason stores are never used across a fork); it leaves by `os._exit`, past them too."""
    gc.disable()
    inherited = _parents_watch
    assert inherited is not None
    fresh = logwatch.watch_logs({"note": other})
    assert fresh is not None
    with logwatch.asking(fresh, "note"):
        pass
    conn.send((sorted(inherited.unchanged_of(["fact"])), sorted(fresh.unchanged_of(["note"])), fresh._hub.pid))
    conn.close()
    os._exit(0)


_parents_watch: logwatch.TableWatch | None = None


def test_a_forked_child_does_not_take_the_parents_events(tmp_path):
    global _parents_watch
    watched, other = tmp_path / "fact", tmp_path / "note"
    watched.mkdir()
    other.mkdir()
    _parents_watch = logwatch.watch_logs({"fact": str(watched)})
    assert _parents_watch is not None
    with logwatch.asking(_parents_watch, "fact"):
        pass
    assert _parents_watch.unchanged_of(["fact"]) == {"fact"}
    ctx = mp.get_context("fork")
    receiving, sending = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_in_a_forked_child, args=(str(watched), str(other), sending))
    gc.collect()
    gc.freeze()  # what the child inherits is never collected there
    try:
        child.start()
    finally:
        gc.unfreeze()
    assert receiving.poll(60)
    inherited, fresh, pid = receiving.recv()
    child.join(60)
    assert child.exitcode == 0
    assert inherited == []  # the parent's queue is not the child's to read: every table is asked
    assert fresh == ["note"] and pid == child.pid  # a store the child opens watches through its own
    (watched / "00000000000000000001.json").write_text("{}")
    assert _parents_watch.unchanged_of(["fact"]) == set()  # and the parent still gets its events
    _parents_watch.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_reader_with_the_watch_answers_as_one_that_asks_every_table_while_another_store_writes(
    tmp_path, monkeypatch, seed
):
    """The watch only spares asking: a reader with it and one without, beside a writer doing
    writes, supersessions, retractions, preferences, episodes and forgets in random order,
    answer every read alike."""
    rng = random.Random(seed)
    clock = SimClock(day(1))
    writer = watched_store(tmp_path / "store", clock)
    watching = watched_store(tmp_path / "store", clock)
    monkeypatch.setenv(WATCH_ENV, "0")
    asking = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    assert asking.lake._watch is None and asking.ledger._watch is None
    asked: Counter[int] = Counter()  # tables asked, by reader
    real = Lake._refresh_table

    def counting(self: Lake, kind: str, force: bool) -> bool:
        asked[id(self)] += 1
        return real(self, kind, force)

    monkeypatch.setattr(Lake, "_refresh_table", counting)
    subjects = [f"user:{n}" for n in range(4)]
    written: list[str] = []
    for step in range(30):
        clock.advance(hours=1)
        subject, move = rng.choice(subjects), rng.random()
        if move < 0.45:
            written.append(writer.write(fact(subject, "plan", f"plan {step}", clock()), by=CURATOR).record_id)
        elif move < 0.6:
            writer.write(ml.Preference(subject, "tone", f"tone {step}", clock(), source="test@v1"), by=CURATOR)
        elif move < 0.7:
            writer.write(episode("checkout", f"slow page {step}", "fixed", clock()), by=CURATOR)
        elif move < 0.85 and written:
            with contextlib.suppress(ml.LakehouseError):  # already retracted or forgotten
                writer.retract(written.pop(rng.randrange(len(written))), by=CURATOR, reason="wrong")
        else:
            writer.forget(subject, by=STEWARD, reason="erasure request")
        for reader_subject in subjects:
            answers = [r.get_fact(reader_subject, "plan", by=MEMBER) for r in (watching, asking)]
            assert answers[0] == answers[1], (step, reader_subject)
            tones = [r.get_fact(reader_subject, "tone", by=MEMBER, kind="preference") for r in (watching, asking)]
            assert tones[0] == tones[1], (step, reader_subject)
        recalled = [
            [h.record.record_id for h in r.recall("plan tone slow page", by=MEMBER)] for r in (watching, asking)
        ]
        assert recalled[0] == recalled[1], step
    assert 0 < asked[id(watching.lake)] < asked[id(asking.lake)] / 2  # the watch spared most of the asking
