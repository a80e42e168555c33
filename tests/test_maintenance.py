"""`store.maintenance` never changes an answer: compaction, checkpoints, log cleanup and vacuum
leave every row's system time and every as-of read as they were, keep purge's guarantee, and
run beside a writer in another process without losing its writes."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import threading
import time
import types
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from _forgetting import KINDS, SUBJECT, canary, files_holding, leaks, open_store, other_reads, write_mixed_world
from _support import CURATOR, MEMBER, STEWARD, SimClock, age_files, day, fact, present
from _writers import child_writes
from deltalake import DeltaTable
from test_time_travel import TABLES, answers, commit_log, tell_story

import memory_lakehouse as ml
from memory_lakehouse.cli import main as cli
from memory_lakehouse.records import SPECS

OFF = ml.MaintenancePolicy(None, None)


def system_time(store: ml.MemoryStore) -> dict[str, list]:
    """Every row's record id with its system time (known_since, commit version), per table."""
    out = {}
    for kind in TABLES:
        rows = store.lake.known_rows(kind).select(["record_id", "known_since", "commit_version"])
        out[kind] = sorted(rows.to_pylist(), key=lambda r: r["record_id"])
    return out


def facts_over_time(store: ml.MemoryStore, times) -> dict:
    return {
        (t, who.id): getattr(store.get_fact("user:42", "plan", by=who, as_of=t), "record_id", None)
        for t in times
        for who in (MEMBER, CURATOR)
    }


def many_small_files(store: ml.MemoryStore, clock: SimClock, n: int = 12) -> None:
    for i in range(n):
        clock.advance(hours=3)
        store.write(fact("user:42", "plan", f"plan-{i % 5}", clock.now), by=MEMBER)
        store.write(fact(f"user:{i}", "region", "EU" if i % 2 else "US", clock.now - timedelta(days=1)), by=MEMBER)


@pytest.fixture
def story(tmp_path):
    clock = SimClock(day(0))
    store = ml.open(tmp_path / "store", clock=clock, maintenance=OFF)
    tell_story(store, clock)
    many_small_files(store, clock)
    return store, clock


def test_compact_checkpoint_and_vacuum_change_no_answer_and_no_system_time(story):
    store, clock = story
    before, times_before, log_before = answers(store), system_time(store), commit_log(store)
    readings = sorted({k[0] for k in before})
    facts_before = facts_over_time(store, readings)
    status = store.maintenance.status()
    assert (
        status.tables["fact"].files > 10
        and status.tables["fact"].commits_since_compaction == status.tables["fact"].version + 1
    )

    compacted = store.maintenance.compact()
    assert compacted.files_removed > compacted.files_added >= 1
    assert store.maintenance.status().tables["fact"].files < status.tables["fact"].files
    checkpointed = store.maintenance.checkpoint()
    assert checkpointed.commits_recorded >= len(log_before) and checkpointed.checkpoints["fact"] >= 0
    dry = store.maintenance.vacuum(retain=timedelta(0))
    assert dry.dry_run and dry.files["fact"]
    assert all((Path(store.root) / "fact" / rel).exists() for rel in dry.files["fact"])  # a dry run deletes nothing
    done = store.maintenance.vacuum(retain=timedelta(0), dry_run=False)
    assert set(done.files["fact"]) == set(dry.files["fact"]) and done.bytes > 0
    assert not any((Path(store.root) / "fact" / rel).exists() for rel in done.files["fact"])

    for s in (store, ml.open(store.root, clock=clock, maintenance=OFF)):
        assert answers(s) == before
        assert system_time(s) == times_before
        assert facts_over_time(s, readings) == facts_before
        maintenance_ops = {c.operation for c in s.lake.commits()} - {c[3] for c in log_before}
        assert maintenance_ops <= {"optimize", "vacuum"}
        assert [c for c in commit_log(s) if c[3] not in maintenance_ops] == log_before
    after = store.maintenance.status().tables["fact"]
    assert after.oldest_readable_version > 0  # time travel before the compaction has nothing left to read
    assert after.commits_since_compaction < after.version


def test_a_compaction_moves_files_under_a_warm_view_without_reloading_it(story):
    """Compaction commits say dataChange: false: the view keeps its rows, positions and
    everything derived from them (no reload, no rebuilt heads); a purge, which removes
    rows, still reloads."""
    store, clock = story
    view = store.lake.views["fact"]
    before, epoch, rows = answers(store), view.epoch, view.rows
    compacted = store.maintenance.compact()
    assert compacted.files_removed > compacted.files_added >= 1
    store.lake.refresh()
    assert view.epoch == epoch and view.rows is rows  # the same snapshot, not a reload
    live = pa.table(DeltaTable(store.lake.uri("fact")).get_add_actions(flatten=False)).column("path")
    assert view.paths == {unquote(p) for p in live.to_pylist()}  # the files the table holds now
    assert answers(store) == before
    assert answers(ml.open(store.root, clock=clock, maintenance=OFF)) == before

    clock.advance(hours=1)
    store.forget("user:42", by=STEWARD, reason="erasure request")
    store.purge(by=STEWARD)
    store.lake.refresh()
    assert view.epoch > epoch  # rows left the table: the snapshot is read again
    assert "user:42" not in view.rows.column("subject").to_pylist()


def test_a_rearranging_commit_that_removes_a_file_the_view_never_read_makes_it_read_the_table_again(story):
    """A view vouches only for the rows of files it read: a commit that moves rows out of any
    other file (one whose add this view never saw) is not taken as a rename of its own files."""
    store, _ = story
    lake = store.lake
    lake.refresh()
    view = lake.views["fact"]
    paths, version = set(view.paths), view.version
    moved_in = {"add": {"path": "org=acme/part-moved.parquet", "partitionValues": {"org": "acme"}, "dataChange": False}}
    stranger = {"remove": {"path": "org=acme/part-never-read.parquet", "dataChange": False}}
    assert not lake._apply_commits("fact", [(version + 1, [{"commitInfo": {}}, moved_in, stranger])])
    assert view.paths == paths and view.version == version  # left for the caller's reload


def test_system_time_survives_the_log_deleting_its_old_commit_files(story):
    store, clock = story
    before, times_before, log_before = answers(store), system_time(store), commit_log(store)
    audit_before = store.audit(subject="user:42", by=STEWARD)
    for table in TABLES:  # an operator shortens the log's retention, as Delta's defaults would
        DeltaTable(f"{store.root}/{table}").alter.set_table_properties(
            {"delta.logRetentionDuration": "interval 1 days"}
        )
        age_files((Path(store.root) / table / "_delta_log").glob("*.json"), days=60)
    store.lake.refresh()
    log_before = commit_log(store)  # the property changes are commits too (not memory commits)

    report = store.maintenance.checkpoint()
    assert report.log_files_deleted > 0
    assert not (Path(store.root) / "fact" / "_delta_log" / f"{0:020d}.json").exists()  # the log forgot them

    reopened = ml.open(store.root, clock=clock, maintenance=OFF)
    assert commit_log(reopened) == log_before
    assert system_time(reopened) == times_before
    assert answers(reopened) == before
    assert reopened.audit(subject="user:42", by=STEWARD) == audit_before
    clock.advance(days=1)
    assert reopened.write(fact("user:42", "plan", "Platinum", clock.now), by=MEMBER).action == "superseded"
    assert {k: v for k, v in answers(reopened).items() if k in before} == before

    # the control: without `_commits`, the rows of the forgotten commits would lose their system time
    bare = Path(store.root).parent / "bare"
    shutil.copytree(store.root, bare)
    shutil.rmtree(bare / "_commits")
    lost = ml.open(bare, clock=clock, maintenance=OFF)
    assert sum(len(v) for v in system_time(lost).values()) < sum(len(v) for v in times_before.values())


def test_a_purge_after_a_compaction_leaves_no_erased_byte_and_a_later_compaction_brings_none_back(tmp_path):
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger", maintenance=OFF)
    can = canary()
    write_mixed_world(store, clock, can)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    assert store.maintenance.compact().files_removed  # the subject's rows are copied into the new files
    held = files_holding([store.root], [can])[can]
    assert len([p for p in held if p.endswith(".parquet")]) > len(KINDS)  # old files and new ones hold it
    before = other_reads(store, [day(1), day(2), day(3)])

    report = store.purge(by=STEWARD)
    assert report.verified is True, report.leftovers
    assert files_holding([store.root, tmp_path / "ledger"], [can]) == {}

    store.maintenance.compact()
    store.maintenance.checkpoint()
    store.maintenance.vacuum(retain=timedelta(0), dry_run=False)
    assert files_holding([store.root, tmp_path / "ledger"], [can]) == {}
    assert leaks(store, subject=SUBJECT, needles=[can], times=[day(1), day(3)]) == []
    assert other_reads(store, [day(1), day(2), day(3)]) == before


def shorten_log_retention(store: ml.MemoryStore, *, age_days: int = 60) -> None:
    """An operator's shorter ``delta.logRetentionDuration`` (Delta's default is 30 days), with
    every commit file so far aged past it: the next checkpoint lets Delta delete them."""
    for table in TABLES:
        DeltaTable(f"{store.root}/{table}").alter.set_table_properties(
            {"delta.logRetentionDuration": "interval 1 days"}
        )
        age_files((Path(store.root) / table / "_delta_log").glob("*.json"), days=age_days)
    store.lake.refresh()


def let_the_log_forget_the_compaction(store: ml.MemoryStore, clock: SimClock) -> None:
    """Checkpoint twice with a write between, every log file aged past the shortened retention:
    Delta deletes the commit files below the checkpoint before the newest, the compaction's too."""
    for i in range(2):
        clock.advance(hours=1)
        store.write(fact(f"user:{90 + i}", "plan", "Basic", clock.now), by=MEMBER)
        store.maintenance.checkpoint()
        age_files(Path(store.root).glob("*/_delta_log/0*"), days=60)
    optimize = [v for v, c in store.lake.views["fact"].commits.items() if c.operation == "optimize"]
    assert optimize and not (Path(store.root) / "fact" / "_delta_log" / f"{optimize[0]:020d}.json").exists()


def test_a_purge_deletes_compacted_away_files_whose_commit_the_log_has_deleted(tmp_path):
    # the compaction's own commit file names the files it removed; once the log's retention
    # deletes it, purge must still find them (the checkpoint keeps their tombstones)
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger", maintenance=OFF)
    can = canary()
    write_mixed_world(store, clock, can)
    assert store.maintenance.compact().files_removed  # the old small files still hold the canary
    shorten_log_retention(store)
    let_the_log_forget_the_compaction(store, clock)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")

    report = store.purge(by=STEWARD)

    assert report.verified is True, report.leftovers
    assert files_holding([store.root, tmp_path / "ledger"], [can]) == {}


def test_a_purge_deletes_compacted_away_files_no_log_entry_names_any_more(tmp_path):
    # a tombstone lasts delta.deletedFileRetentionDuration; after it, only the file's age says it
    # is not an append in flight, and purge must not leave it holding erased rows
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger", maintenance=OFF)
    can = canary()
    write_mixed_world(store, clock, can)
    for table in TABLES:
        DeltaTable(f"{store.root}/{table}").alter.set_table_properties(
            {"delta.deletedFileRetentionDuration": "interval 1 seconds"}
        )
    assert store.maintenance.compact().files_removed
    time.sleep(1.5)  # Delta drops a tombstone from its checkpoints once it is older than that
    shorten_log_retention(store)
    age_files(Path(store.root).glob("*/org=*/*.parquet"), days=60)
    let_the_log_forget_the_compaction(store, clock)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    # an append in flight: its file written a moment ago, its commit not yet made
    in_flight = Path(store.root) / "fact" / "org=acme" / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(pa.table({"record_id": ["fac_in_flight"]}), in_flight)

    report = store.purge(by=STEWARD)

    assert report.verified is True, report.leftovers
    assert files_holding([store.root, tmp_path / "ledger"], [can]) == {}
    assert in_flight.exists(), "purge deleted a file no commit has removed"


def four_small_files(tmp_path: Path, *, subjects: int) -> tuple[ml.MemoryStore, SimClock]:
    """A store with the policy off and four one-fact appends an hour apart over *subjects* subjects."""
    clock = SimClock(day(1))
    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder(dim=32), maintenance=OFF)
    for i in range(4):
        clock.advance(hours=1)
        store.write(fact(f"user:{i % subjects}", "plan", f"plan {i}", clock.now), by=MEMBER)
    return store, clock


def test_vacuum_deletes_compacted_away_files_whose_tombstones_expired_and_no_append_in_flight(tmp_path):
    store, clock = four_small_files(tmp_path, subjects=4)
    DeltaTable(f"{store.root}/fact").alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 1 seconds"}
    )
    before = answers(store)
    old_files = {p.name for p in (Path(store.root) / "fact").glob("org=*/*.parquet")}
    assert store.maintenance.compact().files_removed >= 4
    time.sleep(1.5)
    store.maintenance.checkpoint()  # the tombstones expired: the checkpoint no longer names the old files
    age_files((Path(store.root) / "fact").glob("org=*/*.parquet"), days=30)
    in_flight = next((Path(store.root) / "fact").glob("org=*")) / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(pa.table({"record_id": ["fac_in_flight"]}), in_flight)

    dry = store.maintenance.vacuum(retain=timedelta(days=7))
    assert {Path(rel).name for rel in dry.files["fact"]} == old_files
    done = store.maintenance.vacuum(retain=timedelta(days=7), dry_run=False)

    assert done.files == dry.files
    assert not old_files & {p.name for p in (Path(store.root) / "fact").glob("org=*/*.parquet")}
    assert in_flight.exists(), "vacuum deleted a file written a moment ago"
    assert answers(store) == before
    assert answers(ml.open(store.root, clock=clock, maintenance=OFF)) == before
    assert store.maintenance.vacuum(retain=timedelta(days=60)).files == {}  # younger than that: kept


def test_a_second_purge_after_compacting_a_purged_partition_deletes_the_old_files(tmp_path):
    # purge rewrites with delta-rs, whose files hold string_view columns; a compaction then
    # removes such a file, and the next purge reads it to delete it (found by
    # tests/test_model_maintenance.py: the purge raised ArrowNotImplementedError on is_in)
    store, clock = four_small_files(tmp_path, subjects=3)
    store.maintenance.compact()
    clock.advance(days=1)
    store.forget("user:1", by=STEWARD, reason="erasure request")
    assert store.purge(by=STEWARD).verified is True
    for i in range(3):
        clock.advance(hours=1)
        store.write(fact(f"user:{i % 3}", "plan", f"later plan {i}", clock.now), by=MEMBER)
    assert store.maintenance.compact().files_removed  # the purge's rewritten file among them
    clock.advance(days=1)
    store.forget("user:2", by=STEWARD, reason="erasure request")

    report = store.purge(by=STEWARD)

    assert report.verified is True, report.leftovers
    assert store.lake.unreferenced_files("fact").named == []  # every file a rewrite removed is gone
    kept = store.get_fact("user:0", "plan", by=MEMBER)
    assert kept is not None and kept.value == "later plan 0"
    assert store.get_fact("user:2", "plan", by=MEMBER) is None


@pytest.mark.integration
def test_maintenance_beside_a_writer_process_loses_no_write(tmp_path):
    clock = SimClock(day(1))
    path = str(tmp_path / "store")
    store = ml.open(path, clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    many_small_files(store, clock, n=6)
    writes = 40
    ctx = multiprocessing.get_context("spawn")
    started, out, halfway, resume = ctx.Event(), ctx.Queue(), ctx.Event(), ctx.Event()
    child = ctx.Process(target=child_writes, args=(path, writes, day(2), started, out, halfway, resume))
    child.start()
    try:
        assert started.wait(120), "the writer never opened the store"
        assert halfway.wait(120), "the writer never wrote half its records"
        # one compaction between the child's first and second halves, then more beside its second half
        clock.advance(minutes=1)
        store.write(fact("parent:first", "plan", "parent plan", clock.now), by=MEMBER)
        assert store.maintenance.compact().files_removed, "nothing was compacted"
        resume.set()
        rounds = 0
        while child.is_alive() or rounds < 2:
            clock.advance(minutes=1)
            store.write(fact(f"parent:{rounds}", "plan", f"parent plan {rounds}", clock.now), by=MEMBER)
            store.maintenance.compact()
            store.maintenance.checkpoint()
            rounds += 1
            if out.qsize():
                break
        child_ids = out.get(timeout=300)
        child.join(60)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    store.lake.refresh()  # what every public read does first
    known = store.lake.known_rows("fact")
    child_versions = [
        v
        for rid, v in zip(
            known.column("record_id").to_pylist(), known.column("commit_version").to_pylist(), strict=True
        )
        if rid in set(child_ids)
    ]
    compactions = [v for v, c in store.lake.views["fact"].commits.items() if c.operation == "optimize"]
    # the compactions really ran while the other process appended
    assert any(min(child_versions) < v < max(child_versions) for v in compactions), (child_versions, compactions)
    assert len(child_ids) == writes
    for s in (store, ml.open(path, clock=clock, maintenance=OFF)):
        known = s.lake.known_rows("fact")
        ids = set(known.column("record_id").to_pylist())
        assert set(child_ids) <= ids
        assert {f"parent:{n}" for n in range(rounds)} <= set(known.column("subject").to_pylist())
        assert known.column("known_since").null_count == 0
        assert present(s.get_fact("child:39", "plan", by=CURATOR)).value == "child plan 39"
    store.maintenance.compact()  # the other process's files are compacted like this one's
    assert store.maintenance.status().tables["fact"].files < writes


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_the_policy_compacts_as_the_store_is_written_and_answers_as_a_store_without_it(tmp_path, background):
    stores = {}
    maintained_policy = ml.MaintenancePolicy(every_commits=5, every_bytes=None, background=background)
    for name, policy in (("plain", OFF), ("maintained", maintained_policy)):
        clock = SimClock(day(0))
        stores[name] = ml.open(tmp_path / name, clock=clock, maintenance=policy)
        many_small_files(stores[name], clock, n=15)
    plain, maintained = stores["plain"], stores["maintained"]
    assert maintained.maintenance.wait(timeout=60)
    ops = [c.operation for c in maintained.lake.commits() if c.table == "fact"]
    # inline, each run follows the fifth commit since the last; in the background, appends made
    # during a run are taken by one run after it
    assert ops.count("optimize") >= (1 if background else 4)
    assert "optimize" not in [c.operation for c in plain.lake.commits()]
    assert maintained.maintenance.status().tables["fact"].files < plain.maintenance.status().tables["fact"].files
    assert maintained.maintenance.status().tables["fact"].commits_recorded > 0  # the policy records commits too

    def values(store: ml.MemoryStore) -> dict:
        times = sorted({c.committed_at for c in store.lake.commits() if c.is_memory})
        return {
            (t, s): (f.value, f.known_since) if f else None
            for t in times + [day(9)]
            for s in ("user:42", "user:3", "user:14")
            for f in [store.get_fact(s, "plan" if s == "user:42" else "region", by=MEMBER, as_of=t)]
        }

    assert values(maintained) == values(plain)


def test_a_checkpoint_keeps_the_last_commit_files_by_count_and_no_answer_changes(tmp_path):
    clock = SimClock(day(0))
    store = ml.open(tmp_path / "store", clock=clock, maintenance=ml.MaintenancePolicy(None, None, keep_log_versions=5))
    tell_story(store, clock)
    many_small_files(store, clock)
    before, times_before, log_before = answers(store), system_time(store), commit_log(store)
    audit_before = store.audit(subject="user:42", by=STEWARD)

    store.maintenance.checkpoint()  # no retention was shortened: only the count decides

    log = Path(store.root) / "fact" / "_delta_log"
    version = store.lake.views["fact"].version
    kept = sorted(int(p.name.split(".")[0]) for p in log.glob("*.json"))
    assert kept and kept[0] >= version - 5 and kept[-1] == version  # older commit files are gone
    assert store.maintenance.status().tables["fact"].log_files == len(kept)
    reopened = ml.open(store.root, clock=clock, maintenance=OFF)
    assert commit_log(reopened) == log_before
    assert system_time(reopened) == times_before
    assert answers(reopened) == before
    assert reopened.audit(subject="user:42", by=STEWARD) == audit_before
    assert DeltaTable(f"{store.root}/fact").version() == version  # Delta itself still reads the table
    clock.advance(days=1)
    assert reopened.write(fact("user:42", "plan", "Platinum", clock.now), by=MEMBER).action == "superseded"


def test_a_reader_left_behind_by_more_than_the_kept_log_catches_up(tmp_path):
    # its next commit file is gone: that must not read as "nothing new"
    clock = SimClock(day(0))
    root = tmp_path / "store"
    writer = ml.open(root, clock=clock, maintenance=ml.MaintenancePolicy(None, None, keep_log_versions=2))
    writer.write(fact("user:1", "plan", "Basic", clock.now), by=MEMBER)
    reader = ml.open(root, clock=clock, maintenance=OFF)
    assert present(reader.get_fact("user:1", "plan", by=MEMBER)).value == "Basic"
    behind = reader.lake.views["fact"].version
    for i in range(8):
        clock.advance(hours=1)
        writer.write(fact("user:1", "plan", f"plan {i}", clock.now), by=MEMBER)
    writer.maintenance.checkpoint()
    assert not (root / "fact" / "_delta_log" / f"{behind + 1:020d}.json").exists()

    seen = reader.get_fact("user:1", "plan", by=MEMBER)

    assert seen is not None and seen.value == "plan 7"
    assert reader.lake.views["fact"].version == writer.lake.views["fact"].version
    assert [h.record_id for h in reader.history("user:1", "plan", by=MEMBER)] == [
        h.record_id for h in writer.history("user:1", "plan", by=MEMBER)
    ]


def test_vacuum_refuses_a_negative_retention_and_policies_check_their_numbers(store):
    with pytest.raises(ml.ValidationError):
        store.maintenance.vacuum(retain=timedelta(hours=-1))
    with pytest.raises(ml.ValidationError):
        ml.MaintenancePolicy(every_commits=0)
    with pytest.raises(ml.ValidationError):
        ml.MaintenancePolicy(keep_log_versions=-1)
    with pytest.raises(ml.ValidationError, match="background"):
        ml.MaintenancePolicy(background="yes")  # type: ignore[arg-type]


def test_memlake_maintenance_reports_compacts_and_vacuums(tmp_path, capsys):
    clock = SimClock(day(0))
    store = ml.open(tmp_path / "store", clock=clock, maintenance=OFF)
    many_small_files(store, clock, n=6)
    store.close()
    root = str(tmp_path / "store")
    assert cli(["maintenance", "status", "--store", root, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["tables"]["fact"]["files"] >= 6 and status["commits"] >= 12
    assert cli(["maintenance", "run", "--store", root]) == 0
    out = capsys.readouterr().out
    assert "compact fact" in out and "recorded" in out
    assert cli(["maintenance", "vacuum", "--store", root, "--retain-hours", "0"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert cli(["maintenance", "vacuum", "--store", root, "--retain-hours", "0", "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"]["fact"]
    assert cli(["maintenance", "vacuum", "--store", root, "--retain-hours", "-1"]) == 2
    assert "ValidationError" in capsys.readouterr().err
    reopened = ml.open(root, clock=clock)
    assert present(reopened.get_fact("user:42", "plan", by=MEMBER)).value == "plan-0"
    assert pc.sum(pc.is_null(reopened.lake.known_rows("fact").column("known_since"))).as_py() == 0
    assert set(SPECS) <= set(status["tables"])


class BlockedRuns:
    """Stands in for `Maintenance.run`: records the thread and tables of each call, and holds
    the first one until `release` (or 30 s), before running the real thing or, with
    *hold_after*, after it."""

    def __init__(self, store: ml.MemoryStore, *, hold_after: bool = False) -> None:
        self.real = store.maintenance.run
        self.hold_after = hold_after
        self.calls: list[tuple[threading.Thread, list[str]]] = []
        self.started, self.release, self.finished = threading.Event(), threading.Event(), threading.Event()
        store.maintenance.run = self  # type: ignore[method-assign]

    def __call__(self, *, kinds=None):
        self.calls.append((threading.current_thread(), sorted(kinds or [])))
        first = len(self.calls) == 1
        if first and not self.hold_after:
            self.started.set()
            self.release.wait(30)
        try:
            return self.real(kinds=kinds)
        finally:
            if first and self.hold_after:
                self.started.set()
                self.release.wait(30)
            self.finished.set()


def test_the_policy_runs_in_a_thread_of_its_own_and_the_append_that_made_it_due_returns_first(tmp_path):
    clock = SimClock(day(0))
    store = ml.open(
        tmp_path / "store", clock=clock, maintenance=ml.MaintenancePolicy(every_commits=4, every_bytes=None)
    )
    runs = BlockedRuns(store)
    many_small_files(store, clock, n=2)  # four appends: the fourth makes the fact table due
    assert runs.started.wait(30)
    assert runs.calls[0][0] is not threading.current_thread()  # inline, the append would be stuck in it
    assert not runs.finished.is_set()  # the append returned while its run was held
    assert present(store.get_fact("user:42", "plan", by=MEMBER)).value == "plan-1"  # reads go on meanwhile
    runs.release.set()
    assert store.maintenance.wait(timeout=60) and store.maintenance.last_error is None
    assert "optimize" in [c.operation for c in store.lake.commits() if c.table == "fact"]
    assert len(runs.calls) == 1
    store.close()


def test_appends_made_during_a_background_run_are_taken_by_one_more_run_after_it(tmp_path):
    clock = SimClock(day(0))
    store = ml.open(
        tmp_path / "store", clock=clock, maintenance=ml.MaintenancePolicy(every_commits=4, every_bytes=None)
    )
    runs = BlockedRuns(store, hold_after=True)
    many_small_files(store, clock, n=2)
    assert runs.started.wait(30)  # the first run has compacted, and is held before it ends
    many_small_files(store, clock, n=3)  # six more appends meanwhile: due again
    assert len(runs.calls) == 1  # none started beside the held one
    runs.release.set()
    assert store.maintenance.wait(timeout=60)
    assert [kinds for _, kinds in runs.calls] == [["fact"], ["fact"]]
    assert all(thread is not threading.current_thread() for thread, _ in runs.calls)
    store.close()


def test_closing_the_store_waits_for_its_background_run(tmp_path):
    clock = SimClock(day(0))
    root = tmp_path / "store"
    store = ml.open(root, clock=clock, maintenance=ml.MaintenancePolicy(every_commits=4, every_bytes=None))
    runs = BlockedRuns(store)
    many_small_files(store, clock, n=2)
    assert runs.started.wait(30)
    closing = threading.Thread(target=store.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()  # held by the run, which still needs the store
    runs.release.set()
    closing.join(60)
    assert not closing.is_alive() and runs.finished.is_set() and store.maintenance.last_error is None
    reopened = ml.open(root, clock=clock, create=False, maintenance=OFF)
    assert "optimize" in [c.operation for c in reopened.lake.commits() if c.table == "fact"]
    reopened.close()


def test_a_failed_background_run_warns_keeps_its_error_and_runs_again_after_a_later_append(tmp_path, monkeypatch):
    clock = SimClock(day(0))
    store = ml.open(
        tmp_path / "store", clock=clock, maintenance=ml.MaintenancePolicy(every_commits=4, every_bytes=None)
    )
    real, failures = store.maintenance.compact, list[int]()

    def compact_failing_once(**kwargs):
        if not failures:
            failures.append(1)
            raise OSError("disk full")
        return real(**kwargs)

    monkeypatch.setattr(store.maintenance, "compact", compact_failing_once)

    def write_one(i: int) -> None:  # and wait for the run it may start: no append lands during one
        clock.advance(hours=1)
        store.write(fact("user:42", "plan", f"plan-{i}", clock.now), by=MEMBER)
        assert store.maintenance.wait(timeout=60)

    with pytest.warns(RuntimeWarning, match="maintenance after an append failed"):
        for i in range(10):
            write_one(i)
            if failures:
                break
    assert failures and repr(store.maintenance.last_error) == "OSError('disk full')"
    assert "optimize" not in [c.operation for c in store.lake.commits() if c.table == "fact"]
    write_one(10)  # still due: the next append runs it again
    assert store.maintenance.last_error is None
    assert "optimize" in [c.operation for c in store.lake.commits() if c.table == "fact"]
    store.close()


def test_an_inline_policy_runs_inside_the_append(tmp_path):
    clock = SimClock(day(0))
    policy = ml.MaintenancePolicy(every_commits=4, every_bytes=None, background=False)
    store = ml.open(tmp_path / "store", clock=clock, maintenance=policy)
    runs = BlockedRuns(store)
    runs.release.set()
    many_small_files(store, clock, n=2)
    assert runs.finished.is_set() and runs.calls[0][0] is threading.current_thread()
    store.close()


def test_background_compactions_land_beside_an_appender_that_never_pauses(tmp_path, recwarn):
    """delta-rs gives a rewrite a bounded number of tries at the next version; with appends
    landing every few milliseconds beside it, every try lost until appends and rewrites of
    one table took turns (`Lake.commit_gate`)."""
    clock = SimClock(day(0))
    store = ml.open(
        tmp_path / "store", clock=clock, maintenance=ml.MaintenancePolicy(every_commits=60, every_bytes=None)
    )
    writers = [ml.Principal(f"agent{o}", ml.Scope(f"org{o}"), role="curator") for o in range(4)]
    for n in range(400):
        clock.advance(minutes=1)
        store.write(fact(f"user:{n % 97}", "plan", f"plan {n % 13}", clock.now), by=writers[n % 4])
    assert store.maintenance.wait(timeout=120)
    assert store.maintenance.last_error is None
    assert not [w for w in recwarn if "maintenance after an append failed" in str(w.message)]
    compactions = [c for c in store.lake.commits() if c.table == "fact" and c.operation == "optimize"]
    # each org partition, in each of the runs 400 appends make due: counted from where the
    # last run began, appends landing beside a run (`commit_gate`) do not put the next one back
    assert len(compactions) >= 4 * 5
    store.close()


class HeldCompactions:
    """Stands in for `open_delta_table` in maintenance: the first compaction waits inside until
    `release` (or 30 s); with *fail_first*, it raises CommitFailedError instead of compacting.
    Records whether the table's gate was exclusive at each compaction."""

    def __init__(self, monkeypatch, store: ml.MemoryStore, *, fail_first: bool = False) -> None:
        from memory_lakehouse import maintenance, objectstore

        self.real, self.store, self.fail_first = objectstore.open_delta_table, store, fail_first
        self.inside, self.release = threading.Event(), threading.Event()
        self.exclusive: list[bool] = []
        monkeypatch.setattr(maintenance, "open_delta_table", self)

    def __call__(self, uri, **options):
        table = self.real(uri, **options)
        real_compact = table.optimize.compact

        def compact(**kwargs):
            from deltalake.exceptions import CommitFailedError

            self.exclusive.append(self.store.lake.commit_gate("fact").held)
            if len(self.exclusive) == 1:
                self.inside.set()
                self.release.wait(30)
                if self.fail_first:
                    raise CommitFailedError("lost the race (planted)")
            return real_compact(**kwargs)

        return _WithCompact(table, compact)


class _WithCompact:
    """A `DeltaTable` whose ``optimize.compact`` is *compact* (its ``optimize`` is made anew on each access)."""

    def __init__(self, table, compact) -> None:
        self._table = table
        self.optimize = types.SimpleNamespace(compact=compact)

    def __getattr__(self, name):
        return getattr(self._table, name)


def test_appends_land_while_a_compaction_rewrites_a_partition(tmp_path, monkeypatch):
    """A compaction holds no append back for its whole rewrite (`commit_gate`): at 100k
    records, single writes waited ~0.4 s for each org partition's."""
    clock = SimClock(day(0))
    store = ml.open(tmp_path / "store", clock=clock, maintenance=OFF)
    many_small_files(store, clock)
    held = HeldCompactions(monkeypatch, store)
    compaction = threading.Thread(target=lambda: store.maintenance.compact(kinds=["fact"]))
    compaction.start()
    assert held.inside.wait(30)
    written = threading.Event()

    def write() -> None:
        store.write(fact("user:7", "plan", "pro", clock.now), by=MEMBER)
        written.set()

    writer = threading.Thread(target=write)
    writer.start()
    landed = written.wait(10)  # a held write waits for the release (30 s)
    held.release.set()
    compaction.join(60)
    writer.join(60)
    assert landed, "the write waited for the compaction's rewrite"
    assert held.exclusive and not any(held.exclusive)  # every partition's rewrite beside the appends
    got = store.get_fact("user:7", "plan", by=MEMBER)
    assert got is not None and got.value == "pro"
    assert "optimize" in [c.operation for c in store.lake.commits() if c.table == "fact"]
    store.close()


def test_a_compaction_that_fails_beside_appends_runs_again_alone(tmp_path, monkeypatch):
    clock = SimClock(day(0))
    store = ml.open(tmp_path / "store", clock=clock, maintenance=OFF)
    many_small_files(store, clock)
    before = answers(store)
    held = HeldCompactions(monkeypatch, store, fail_first=True)
    held.release.set()
    report = store.maintenance.compact(kinds=["fact"])
    assert report.files_removed > 0
    assert held.exclusive[:2] == [False, True]  # beside the appends, then alone
    assert store.maintenance.rewrites_run_alone == 1
    assert answers(store) == before
    store.close()


def test_a_log_file_deleted_between_the_listing_and_its_stat_is_left_out_of_the_listing(story, monkeypatch):
    """Maintenance in another thread deletes log files below a checkpoint while a purge lists
    the store's files (the model-based maintenance test met it): a listing is of a moment."""
    lake = story[0].lake
    assert lake.wait_for_checkpoints(timeout=60)  # the story's last append may still be checkpointing
    listed = lake.objects.list("fact")
    gone = next(rel for rel in listed if rel.endswith(".json"))
    real_stat = Path.stat

    def stat(path: Path, *args: object, **kwargs: object) -> object:
        if path.as_posix().endswith(gone):
            raise FileNotFoundError(path)  # as if deleted after the walk named it
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "stat", stat)
    assert lake.objects.list("fact") == {rel: size for rel, size in listed.items() if rel != gone}
    assert gone not in lake.objects.modified("fact")


def test_the_next_compaction_is_due_counted_from_where_the_last_one_began(tmp_path, monkeypatch):
    """Appends land beside a compaction's rewrite (`commit_gate`); counted from the rewrite's
    commit, each run put the next one back by as many commits as it took."""
    every = 10
    clock = SimClock(day(0))
    policy = ml.MaintenancePolicy(every_commits=every, every_bytes=None, keep_log_versions=None)
    store = ml.open(tmp_path / "store", clock=clock, maintenance=policy)
    held = HeldCompactions(monkeypatch, store)
    written = iter(range(1000))

    def write() -> None:
        clock.advance(minutes=1)
        store.write(fact(f"user:{next(written)}", "plan", "pro", clock.now), by=MEMBER)

    def compactions() -> list[int]:
        return [c.version for c in store.lake.commits() if c.table == "fact" and c.operation == "optimize"]

    while not held.inside.wait(0.01):  # the append that makes the table due starts the run
        write()
    began = store.lake.views["fact"].version
    for _ in range(3):  # beside the rewrite, well within the gate's allowance
        write()
    held.release.set()
    assert store.maintenance.wait(timeout=60)
    assert len(compactions()) == 1 and compactions()[0] > began + 3
    while store.lake.views["fact"].version < began + every + 1:
        write()
    assert store.maintenance.wait(timeout=60)
    assert len(compactions()) == 2, "the second run waited for `every` commits after the first one's commit"
    store.close()
