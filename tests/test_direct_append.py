"""Appends written straight into a local table's log (`direct_append`) are Delta as every engine
reads it: delta-rs, polars and a reopened store get the same rows as a store whose appends went
through delta-rs; they interleave with delta-rs's own appends without losing a commit; and a
table they do not fully understand, or one that changed under them, is left to delta-rs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from _support import MEMBER, SimClock, day, fact, present
from deltalake import DeltaTable, write_deltalake

import memory_lakehouse as ml
from memory_lakehouse import direct_append
from memory_lakehouse.errors import StoreError
from memory_lakehouse.lake import Lake
from memory_lakehouse.records import SPECS

pl = pytest.importorskip("polars")

OFF = ml.MaintenancePolicy(None, None)
ORGS = ("acme", "b2:shop@eu", "c.org-1")  # ':' and '@' are escaped in a partition's directory name


def curator(org: str) -> ml.Principal:
    return ml.Principal(f"lead-{org}", ml.Scope(org), role="curator")


def write_stories(store: ml.MemoryStore, clock: SimClock, n: int = 12) -> None:
    """A batch over every org, single writes, and a supersession: what the direct path appends."""
    with store.batch() as b:
        for i in range(n):
            org = ORGS[i % len(ORGS)]
            b.write(fact(f"user:{i}", "plan", f"plan {i}", day(1, i), scope=ml.Scope(org)), by=curator(org))
    for i in range(3):
        clock.advance(minutes=1)
        store.write(fact(f"user:{i}", "plan", f"later plan {i}", day(2, i)), by=curator(ORGS[i % len(ORGS)]))
    store.write(fact("user:99", "plan", "ending", day(1), valid_to=day(3, 0.5)), by=curator("acme"))


def rows_of(table: pa.Table) -> list[tuple]:
    columns = ["record_id", "org", "subject", "value", "valid_from", "valid_to", "txn_id", "status"]
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def add_actions(log: Path) -> list[dict]:
    return [
        json.loads(line)["add"]
        for commit in sorted(log.glob("*.json"))
        for line in commit.read_text().splitlines()
        if line.startswith('{"add"')
    ]


def writers_of(log: Path) -> list[str]:
    """Who wrote each store commit of a table (its ``engineInfo``), oldest first."""
    out = []
    for commit in sorted(log.glob("*.json")):
        info = json.loads(commit.read_text().splitlines()[0]).get("commitInfo", {})
        if "memlake.txn_id" in info:
            out.append("direct" if info.get("engineInfo") == "memory_lakehouse direct append" else "delta-rs")
    return out


@pytest.fixture
def direct_and_delta_rs(tmp_path, monkeypatch):
    """The same stories written by two stores: one through the direct path, one through delta-rs."""
    out = {}
    for name, direct in (("direct", True), ("delta_rs", False)):
        monkeypatch.setattr(Lake, "direct_appends", direct)
        clock = SimClock(day(4))
        store = ml.open(str(tmp_path / name), clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
        write_stories(store, clock)
        out[name] = store
    monkeypatch.setattr(Lake, "direct_appends", True)
    return out


def test_direct_appends_read_back_the_same_through_delta_rs_polars_and_a_reopened_store(direct_and_delta_rs):
    direct, via_delta_rs = direct_and_delta_rs["direct"], direct_and_delta_rs["delta_rs"]
    uri = direct.lake.uri("fact")
    # each store's appends took the path it was set to: the batch and the four single writes
    assert writers_of(Path(uri) / "_delta_log") == ["direct"] * 5
    assert writers_of(Path(via_delta_rs.lake.uri("fact")) / "_delta_log") == ["delta-rs"] * 5
    served = direct.lake.all_rows("fact")
    assert len(served) == 16
    assert rows_of(DeltaTable(uri).to_pyarrow_dataset().to_table()) == rows_of(served)
    assert rows_of(pl.read_delta(uri).to_arrow()) == rows_of(served)
    reopened = ml.open(direct.lake.root, embedder=ml.HashingEmbedder(), maintenance=OFF, create=False)
    assert rows_of(reopened.lake.all_rows("fact")) == rows_of(served)
    for store in (direct, reopened):
        assert present(store.get_fact("user:1", "plan", by=curator(ORGS[1]))).value == "later plan 1"
        assert present(store.get_fact("user:4", "plan", by=curator(ORGS[1]))).value == "plan 4"
    # the same answers, the same system time, as the store whose appends went through delta-rs
    theirs = via_delta_rs.lake.known_rows("fact")
    ours = direct.lake.known_rows("fact")
    columns = ("subject", "value", "known_since")
    assert sorted(zip(*(ours.column(c).to_pylist() for c in columns), strict=True)) == sorted(
        zip(*(theirs.column(c).to_pylist() for c in columns), strict=True)
    )


def test_direct_appends_name_and_describe_their_files_as_delta_rs_does(direct_and_delta_rs):
    """Paths (escaped partition directories), partition values and statistics match delta-rs's."""
    logs = {name: Path(store.lake.uri("fact")) / "_delta_log" for name, store in direct_and_delta_rs.items()}

    def described(log: Path) -> list[tuple]:
        return sorted(
            (
                a["path"].rsplit("/", 1)[0],
                json.dumps(a["partitionValues"]),
                json.dumps(json.loads(a["stats"]), sort_keys=True),
            )
            for a in add_actions(log)
        )

    assert described(logs["direct"]) == described(logs["delta_rs"])
    # b2:shop@eu: a directory named with ':' and '@' escaped, a path in the log escaped again
    assert any("b2%253Ashop%2540eu" in a["path"] for a in add_actions(logs["direct"]))
    assert (logs["direct"].parent / "org=b2%3Ashop%40eu").is_dir()


def test_timestamp_statistics_are_truncated_to_milliseconds_as_delta_rs_writes_them(tmp_path):
    from datetime import UTC, datetime

    values = pa.array(
        [datetime(2026, 1, 1, 1, 2, 3, 456789, tzinfo=UTC), datetime(2026, 1, 1, 1, 2, 3, 400, tzinfo=UTC)],
        pa.timestamp("us", tz="UTC"),
    )
    rows = pa.table({"org": ["a", "a"], "valid_from": values, "whole": [datetime(2026, 1, 2, tzinfo=UTC)] * 2})
    config = {"delta.dataSkippingStatsColumns": "valid_from,whole"}
    write_deltalake(str(tmp_path / "theirs"), rows, partition_by=["org"], configuration=config)
    write_deltalake(str(tmp_path / "ours"), rows.slice(0, 0), partition_by=["org"], configuration=config)
    table = DeltaTable(str(tmp_path / "ours"))
    shape = direct_append.table_supported(table.protocol(), table.metadata(), rows.schema, rows.schema)
    direct_append.append(str(tmp_path / "ours"), rows, shape, {}, after=0)
    stats = [json.loads(add_actions(tmp_path / n / "_delta_log")[0]["stats"]) for n in ("ours", "theirs")]
    assert stats[0] == stats[1]
    assert stats[0]["maxValues"]["valid_from"] == "2026-01-01T01:02:03.456Z"


def test_direct_and_delta_rs_appends_from_two_stores_racing_lose_no_commit(tmp_path, monkeypatch):
    path = str(tmp_path / "store")
    ours = ml.open(path, clock=SimClock(day(1)), embedder=ml.HashingEmbedder(), maintenance=OFF)
    theirs = ml.open(path, clock=SimClock(day(1)), embedder=ml.HashingEmbedder(), maintenance=OFF)
    monkeypatch.setattr(theirs.lake, "direct_appends", False)
    each = 25

    def writes(store: ml.MemoryStore, name: str) -> None:
        for i in range(each):
            store.write(fact(f"{name}:{i}", "plan", f"{name} plan {i}", day(0, i)), by=MEMBER)

    threads = [threading.Thread(target=writes, args=(s, n)) for s, n in ((ours, "ours"), (theirs, "theirs"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    table = DeltaTable(ours.lake.uri("fact"))
    assert table.version() == 2 * each  # version 0 created the table: one commit per write, none lost
    assert sorted(writers_of(Path(ours.lake.uri("fact")) / "_delta_log")) == ["delta-rs"] * each + ["direct"] * each
    subjects = set(table.to_pyarrow_dataset().to_table().column("subject").to_pylist())
    assert subjects == {f"{n}:{i}" for n in ("ours", "theirs") for i in range(each)}
    for store in (ours, theirs):
        assert present(store.get_fact("theirs:24", "plan", by=MEMBER)).value == "theirs plan 24"
        assert present(store.get_fact("ours:24", "plan", by=MEMBER)).value == "ours plan 24"


WRITERS = pytest.mark.parametrize("writer", ["direct", "delta-rs"])


@WRITERS
@pytest.mark.parametrize("background", [True, False], ids=["background", "in-the-append"])
def test_every_checkpoint_interval_th_version_an_append_writes_gets_a_checkpoint(tmp_path, background, writer):
    clock = SimClock(day(1))
    store = ml.open(str(tmp_path / "store"), clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.lake.background_checkpoints = background
    store.lake.direct_appends = writer == "direct"
    for i in range(25):
        store.write(fact(f"user:{i}", "plan", f"plan {i}", day(1, i)), by=MEMBER)
    assert store.lake.wait_for_checkpoints(timeout=60)
    log = Path(store.lake.uri("fact")) / "_delta_log"
    assert writers_of(log) == [writer] * 25
    written = sorted(p.name for p in log.glob("*.checkpoint.parquet"))
    expected = [f"{10:020d}.checkpoint.parquet", f"{20:020d}.checkpoint.parquet"]
    # in the background, version 10's turn may come after version 20 was asked for: then 20 only
    assert written == expected or (background and written == expected[1:])
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 20
    assert DeltaTable(str(log.parent)).to_pyarrow_dataset().count_rows() == 25


def test_a_table_with_a_constraint_is_appended_through_delta_rs_which_enforces_it(tmp_path):
    store = ml.open(str(tmp_path / "store"), clock=SimClock(day(1)), embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.write(fact("user:1", "plan", "basic", day(1)), by=MEMBER)
    DeltaTable(store.lake.uri("fact")).alter.add_constraint({"no_blocked": "subject <> 'blocked'"})
    store.write(fact("user:2", "plan", "pro", day(1)), by=MEMBER)  # allowed: delta-rs checks it and appends
    with pytest.raises(StoreError):
        store.write(fact("blocked", "plan", "pro", day(1)), by=MEMBER)
    assert present(store.get_fact("user:2", "plan", by=MEMBER)).value == "pro"
    assert store.get_fact("blocked", "plan", by=MEMBER) is None


def one_row(store: ml.MemoryStore) -> pa.Table:
    return store.lake.all_rows("fact").select(SPECS["fact"].schema.names).cast(SPECS["fact"].schema).slice(0, 1)


def written_once(tmp_path: Path) -> tuple[ml.MemoryStore, str, int, direct_append.TableShape]:
    """A store with one fact: its fact table's uri, version, and shape as an append sees them."""
    store = ml.open(str(tmp_path / "store"), clock=SimClock(day(1)), embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.write(fact("user:1", "plan", "basic", day(1)), by=MEMBER)
    uri = store.lake.uri("fact")
    table = DeltaTable(uri)
    shape = direct_append.table_supported(
        table.protocol(), table.metadata(), pa.schema(table.schema().to_arrow()), SPECS["fact"].schema
    )
    return store, uri, table.version(), shape


def test_an_append_that_loses_its_version_to_a_table_change_steps_aside_and_leaves_no_file(tmp_path):
    store, uri, seen, shape = written_once(tmp_path)
    files = sorted(Path(uri).rglob("*.parquet"))
    DeltaTable(uri).alter.set_table_properties({"delta.checkpointInterval": "20"})  # a metadata commit lands first
    with pytest.raises(direct_append.DirectAppendUnsupported):
        direct_append.append(uri, one_row(store), shape, {}, after=seen)
    assert sorted(Path(uri).rglob("*.parquet")) == files
    # the store itself falls back to delta-rs for that append, then goes on directly
    store.write(fact("user:2", "plan", "pro", day(1)), by=MEMBER)
    store.write(fact("user:3", "plan", "pro", day(1)), by=MEMBER)
    assert DeltaTable(uri).to_pyarrow_dataset().count_rows() == 3


def test_an_append_never_lands_behind_a_pruned_log(tmp_path):
    """A process whose last known version was pruned below a checkpoint must not write there."""
    store, uri, seen, shape = written_once(tmp_path)
    for _ in range(12):
        write_deltalake(uri, one_row(store), mode="append")
    table = DeltaTable(uri)
    table.create_checkpoint()
    log = Path(uri) / "_delta_log"
    for v in range(seen, table.version() - 2):  # what a log cleanup deletes
        (log / f"{v:020d}.json").unlink()
    with pytest.raises(direct_append.DirectAppendUnsupported):
        direct_append.append(uri, one_row(store), shape, {}, after=seen)
    assert DeltaTable(uri).version() == table.version()


def test_an_interruption_after_the_commit_landed_keeps_the_files_it_names(tmp_path, monkeypatch):
    store, uri, seen, shape = written_once(tmp_path)
    real = direct_append._link_next

    def link_then_interrupt(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt  # after the commit file has its name, before the append returns

    monkeypatch.setattr(direct_append, "_link_next", link_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        direct_append.append(uri, one_row(store), shape, {}, after=seen)
    table = DeltaTable(uri)
    assert table.version() == seen + 1
    assert table.to_pyarrow_dataset().count_rows() == 2  # every file the landed commit names is there
    assert not list((Path(uri) / "_delta_log").glob(".*.tmp"))


def test_a_forked_child_encodes_files_on_threads_of_its_own():
    import os

    assert direct_append._pool().submit(lambda: 1).result(timeout=10) == 1  # the parent's threads exist
    pid = os.fork()
    if pid == 0:  # the child: no deltalake here (it panics after a fork), only the pool
        try:
            ok = direct_append._pool().submit(lambda: 1).result(timeout=10) == 1
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_a_file_system_without_hard_links_sends_appends_to_delta_rs_for_good(tmp_path, monkeypatch):
    import errno

    store, uri, _, _ = written_once(tmp_path)
    calls = []

    def no_links(src, dst):
        calls.append(dst)
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr("memory_lakehouse.direct_append.os.link", no_links)
    for i in range(2, 5):
        store.write(fact(f"user:{i}", "plan", "pro", day(1)), by=MEMBER)
    assert len(calls) == 1 and store.lake.direct_appends is False  # tried once, then delta-rs only
    assert DeltaTable(uri).to_pyarrow_dataset().count_rows() == 4
    assert len(list(Path(uri).rglob("*.parquet"))) == 4  # the refused attempt left no file behind
    assert present(store.get_fact("user:4", "plan", by=MEMBER)).value == "pro"


def test_a_batch_over_more_orgs_than_direct_appends_take_goes_through_delta_rs(tmp_path):
    store = ml.open(str(tmp_path / "store"), clock=SimClock(day(4)), embedder=ml.HashingEmbedder(), maintenance=OFF)
    for orgs in (direct_append.MAX_PARTITIONS + 1, direct_append.MAX_PARTITIONS):
        with store.batch() as b:
            for o in range(orgs):
                org = f"org{orgs}-{o}"
                b.write(fact(f"user:{o}", "plan", "pro", day(1), scope=ml.Scope(org)), by=curator(org))
    assert writers_of(Path(store.lake.uri("fact")) / "_delta_log") == ["delta-rs", "direct"]
    assert DeltaTable(store.lake.uri("fact")).to_pyarrow_dataset().count_rows() == 2 * direct_append.MAX_PARTITIONS + 1


def checkpoint_failing(monkeypatch, message: str, times: int) -> list[int]:
    """Make ``create_checkpoint`` on the handles the lake opens raise delta-rs's error *times* times."""
    from deltalake.exceptions import DeltaError

    from memory_lakehouse.objectstore import open_delta_table as real_open

    calls: list[int] = []

    def open_delta_table(*args, **kwargs):
        handle = real_open(*args, **kwargs)
        real = handle.create_checkpoint

        def create_checkpoint() -> None:
            calls.append(1)
            if len(calls) <= times:
                raise DeltaError(message)
            real()

        handle.create_checkpoint = create_checkpoint  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr("memory_lakehouse.lake.open_delta_table", open_delta_table)
    return calls


@pytest.mark.parametrize("background", [True, False], ids=["background", "in-the-append"])
def test_a_checkpoint_pruned_under_its_handle_is_written_again_from_a_reopened_one(tmp_path, monkeypatch, background):
    clock = SimClock(day(1))
    store = ml.open(str(tmp_path / "store"), clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.lake.background_checkpoints = background
    calls = checkpoint_failing(monkeypatch, "Object at location 00000000000000000000.checkpoint.parquet not found", 1)
    for i in range(10):
        store.write(fact(f"user:{i}", "plan", f"plan {i}", day(1, i)), by=MEMBER)
    assert store.lake.wait_for_checkpoints(timeout=60)
    log = Path(store.lake.uri("fact")) / "_delta_log"
    assert len(calls) == 2 and (log / f"{10:020d}.checkpoint.parquet").exists()


@WRITERS
@pytest.mark.parametrize("background", [True, False], ids=["background", "in-the-append"])
def test_a_checkpoint_that_fails_after_the_commit_landed_does_not_fail_the_write(
    tmp_path, monkeypatch, caplog, background, writer
):
    """Through delta-rs too: its own checkpoint after the append would fail the write (and a
    caller retrying it would write the rows twice), so the store asks for it instead."""
    clock = SimClock(day(1))
    store = ml.open(str(tmp_path / "store"), clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.lake.background_checkpoints = background
    store.lake.direct_appends = writer == "direct"
    calls = checkpoint_failing(monkeypatch, "Generic error: disk full", 10**6)
    for i in range(10):
        store.write(fact(f"user:{i}", "plan", f"plan {i}", day(1, i)), by=MEMBER)  # the tenth checkpoints
    assert store.lake.wait_for_checkpoints(timeout=60)
    assert calls and "no checkpoint after the append to fact" in caplog.text
    assert present(store.get_fact("user:0", "plan", by=MEMBER)).value == "plan 0"
    log = Path(store.lake.uri("fact")) / "_delta_log"
    assert writers_of(log) == [writer] * 10 and not list(log.glob("*.checkpoint.parquet"))


@WRITERS
def test_the_append_that_reaches_the_checkpoint_interval_returns_before_its_checkpoint_is_written(tmp_path, writer):
    clock = SimClock(day(1))
    store = ml.open(str(tmp_path / "store"), clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.lake.direct_appends = writer == "direct"
    real, entered, release, threads = store.lake.write_checkpoint, threading.Event(), threading.Event(), []

    def held(kind: str, version: int) -> None:
        threads.append(threading.current_thread())
        entered.set()
        release.wait(30)
        real(kind, version)

    store.lake.write_checkpoint = held  # type: ignore[method-assign]
    for i in range(10):
        store.write(fact(f"user:{i}", "plan", f"plan {i}", day(1, i)), by=MEMBER)
    log = Path(store.lake.uri("fact")) / "_delta_log"
    assert entered.wait(30) and threads[0] is not threading.current_thread()  # in the append, it would be stuck
    assert not (log / f"{10:020d}.checkpoint.parquet").exists()
    release.set()
    store.close()  # waits for it
    assert (log / f"{10:020d}.checkpoint.parquet").exists()


def test_opening_a_table_tries_again_when_a_prune_took_the_checkpoint_it_was_told_of(tmp_path, monkeypatch):
    import deltalake
    from deltalake.exceptions import DeltaError, TableNotFoundError

    from memory_lakehouse.objectstore import open_delta_table

    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [1]}))
    real, calls = deltalake.DeltaTable, []

    def flaky(errors):
        def open_(*args, **kwargs):
            calls.append(1)
            if len(calls) <= len(errors):
                raise errors[len(calls) - 1]
            return real(*args, **kwargs)

        return open_

    pruned = DeltaError("Object at location _delta_log/00000000000000000040.checkpoint.parquet not found")
    monkeypatch.setattr(deltalake, "DeltaTable", flaky([pruned, pruned]))
    assert open_delta_table(uri).version() == 0 and len(calls) == 3
    for error in (TableNotFoundError("no log files"), DeltaError("Generic error: permission denied")):
        calls.clear()
        monkeypatch.setattr(deltalake, "DeltaTable", flaky([error]))
        with pytest.raises(type(error)):
            open_delta_table(uri)
        assert len(calls) == 1  # a reason a second look cannot change


def test_a_write_handle_whose_next_commits_were_pruned_is_opened_again(tmp_path):
    from deltalake.exceptions import DeltaError

    clock = SimClock(day(1))
    root = str(tmp_path / "store")
    store = ml.open(root, clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.lake.direct_appends = False  # every append through the write handle
    store.write(fact("user:1", "plan", "one", day(1)), by=MEMBER)
    other = ml.open(root, clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    other.write(fact("user:2", "plan", "two", day(1)), by=MEMBER)  # the handle is now behind

    def pruned() -> None:
        raise DeltaError("Kernel error: File not found: _delta_log/00000000000000000002.json")

    stale = store.lake._writers["fact"]
    stale.update_incremental = pruned  # type: ignore[method-assign]
    store.write(fact("user:3", "plan", "three", day(1)), by=MEMBER)
    assert store.lake._writers["fact"] is not stale
    assert [present(store.get_fact(f"user:{i}", "plan", by=MEMBER)).value for i in (1, 2, 3)] == ["one", "two", "three"]


def test_a_checkpoint_asked_for_after_a_newer_one_was_written_is_skipped(tmp_path):
    """``_last_checkpoint`` never moves back: maintenance may have pruned the commits after the older one."""
    clock = SimClock(day(1))
    store = ml.open(str(tmp_path / "store"), clock=clock, embedder=ml.HashingEmbedder(), maintenance=OFF)
    store.lake.background_checkpoints = False
    for i in range(12):
        store.write(fact(f"user:{i}", "plan", f"plan {i}", day(1, i)), by=MEMBER)
    log = Path(store.lake.uri("fact")) / "_delta_log"
    DeltaTable(str(log.parent)).create_checkpoint()  # maintenance's, at 12
    (log / f"{10:020d}.checkpoint.parquet").unlink()
    store.lake.write_checkpoint("fact", 10)  # asked for before, written after
    assert not (log / f"{10:020d}.checkpoint.parquet").exists()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 12
