"""Many writer processes share one store; a crash mid-batch leaves nothing half-visible.

Writers are real processes (``spawn``), each with its own store handle. A batch is one
commit per table, so a process killed between its tables' commits leaves a torn
transaction on disk: the store must serve it as if it never happened.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _support import ORG, STEWARD, SimClock, day, episode, fact, present
from deltalake import CommitProperties, DeltaTable, write_deltalake

import memory_lakehouse as ml
from memory_lakehouse.lake import commit_metadata, new_txn_id
from memory_lakehouse.records import SPECS, subject_key
from memory_lakehouse.time import Basis

WRITERS, WRITES = 4, 25
BATCH = 1000  # per kind: facts + episodes in one write_many
FAR = datetime(2100, 1, 1, tzinfo=UTC)
#: Where in the batch to kill the writer, as a share of its measured duration. Validation and
#: reconcile take most of it; the two table commits come last, a few milliseconds apart.
KILL_AT = (0.86, 0.88, 0.89, 0.9, 0.91, 0.92, 0.87, 0.93, 0.95, 0.5, 0.8, 0.97)


# --------------------------------------------------------------------------- child processes


def _write_singles(root: str, worker: int) -> None:
    store = ml.open(root)
    who = ml.Principal(f"writer-{worker}", ml.Scope("acme"), role="steward")
    for i in range(WRITES):
        res = store.write(
            ml.Fact(f"w{worker}:s{i}", "n", i, datetime(2026, 1, 1, tzinfo=UTC), source="concurrency"), by=who
        )
        assert res.action == "inserted"


def _big_batch(n: int) -> list:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    who = ml.Scope("acme")
    facts = [ml.Fact(f"bulk:{i}", "n", i, t, source="backfill", scope=who) for i in range(n)]
    eps = [
        ml.Episode(
            "checkout", "prod", f"symptom {i}", "restart", "fixed", t, evidence=f"INC-{i}", source="backfill", scope=who
        )
        for i in range(n)
    ]
    return facts + eps


def _stamp(path: str) -> None:
    """Write the monotonic clock (system-wide on Linux) to *path* atomically."""
    Path(path + ".tmp").write_text(str(time.monotonic()))
    os.replace(path + ".tmp", path)


def _write_batch(root: str, started: str) -> None:
    store = ml.open(root)
    records = _big_batch(BATCH)
    _stamp(started)
    store.write_many(records, by=ml.Principal("backfill", ml.Scope("acme"), role="steward"))
    _stamp(started + ".done")


# --------------------------------------------------------------------------- helpers


def visible(store: ml.MemoryStore, kind: str) -> pa.Table:
    return store.vis.rows(kind, STEWARD, Basis(known_at=FAR, valid_at=FAR))


def raw(root: Path, kind: str) -> pa.Table:
    return DeltaTable(str(root / kind)).to_pyarrow_dataset().to_table()


# --------------------------------------------------------------------------- the tests


@pytest.mark.integration
def test_four_writer_processes_each_land_every_write(tmp_path):
    root = str(tmp_path / "store")
    ml.open(root)  # create the tables once, as `memlake init` would
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_singles, args=(root, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0, f"writer {p.pid} exited with {p.exitcode}"

    store = ml.open(root)
    known = store.lake.known_rows("fact")
    assert known.num_rows == WRITERS * WRITES
    subjects = set(visible(store, "fact").column("subject").to_pylist())
    assert subjects == {f"w{w}:s{i}" for w in range(WRITERS) for i in range(WRITES)}
    assert len(set(known.column("record_id").to_pylist())) == WRITERS * WRITES
    assert DeltaTable(f"{root}/fact").version() == WRITERS * WRITES  # one commit per write, none lost
    readings = [c.committed_at for _, c in sorted(store.lake.views["fact"].commits.items()) if c.is_memory]
    assert readings == sorted(readings)  # system time only moves forward along the versions


def _outcome(root: Path, txn_kinds=("episode", "fact")) -> tuple[int, int]:
    """How many rows of the batch each table holds on disk (committed parts)."""
    return tuple(raw(root, k).num_rows for k in txn_kinds)


@pytest.mark.integration
def test_a_writer_killed_mid_batch_leaves_all_or_nothing_and_the_store_still_works(tmp_path):
    ctx = mp.get_context("spawn")
    seen: set[str] = set()
    duration = None
    deadline = time.monotonic() + 25
    attempt = 0
    while time.monotonic() < deadline and "torn" not in seen:
        root = tmp_path / f"store-{attempt}"
        ml.open(root)
        started = str(tmp_path / f"started-{attempt}")
        child = ctx.Process(target=_write_batch, args=(str(root), started))
        child.start()
        while not Path(started).exists() and child.is_alive():
            time.sleep(0.001)
        if duration is None:  # the first run measures how long a batch takes (monotonic is system-wide)
            child.join(timeout=120)
            duration = float(Path(started + ".done").read_text()) - float(Path(started).read_text())
        else:  # then kill at points spread over the batch, densest where the tables commit (the end)
            fraction = KILL_AT[attempt % len(KILL_AT)]
            time.sleep(max(0.0, float(Path(started).read_text()) + duration * fraction - time.monotonic()))
            if child.is_alive() and child.pid is not None:
                os.kill(child.pid, signal.SIGKILL)
            child.join(timeout=30)
        episodes, facts = _outcome(root)
        seen.add("none" if episodes == facts == 0 else "all" if episodes == facts == BATCH else "torn")
        check_all_or_nothing(root)
        attempt += 1
    assert seen, "no attempt ran"
    print(f"crash outcomes over {attempt} attempts: {sorted(seen)}")


def check_all_or_nothing(root: Path) -> None:
    store = ml.open(root, clock=SimClock(day(400)))
    counts = {k: visible(store, k).num_rows for k in ("fact", "episode")}
    known = {k: store.lake.known_rows(k).num_rows for k in ("fact", "episode")}
    on_disk = _outcome(root)
    for k in ("fact", "episode"):
        assert counts[k] in (0, BATCH) and known[k] in (0, BATCH)
    if on_disk == (BATCH, BATCH):
        assert counts == {"fact": BATCH, "episode": BATCH}
    else:  # a part is missing: the transaction is invisible as a whole
        assert counts == {"fact": 0, "episode": 0} and known == {"fact": 0, "episode": 0}
    # the store opens, serves reads and takes new writes (including both kinds again)
    new = store.write(fact("after:crash", "ok", True, day(1), scope=ORG), by=STEWARD)
    assert present(store.get_fact("after:crash", "ok", by=STEWARD)).record_id == new.record_id
    res = store.write_many(
        [
            fact("after:crash", "n", 1, day(1), scope=ORG),
            episode("checkout", "after the crash", "fixed", day(1), scope=ORG),
        ],
        by=STEWARD,
    )
    assert {r.action for r in res} == {"inserted"}
    assert visible(store, "episode").num_rows == counts["episode"] + 1


def test_a_torn_multi_table_transaction_is_invisible_until_its_last_part_lands(tmp_path):
    """The crash above, made deterministic: commit one part of a two-table transaction by hand."""
    clock = SimClock(day(10))
    store = ml.open(tmp_path / "store", clock=clock)
    before = store.write(fact("user:1", "plan", "Pro", day(1), scope=ORG), by=STEWARD)
    rows = _rows_of_one_transaction(store)
    txn, tables, meta = rows
    write_deltalake(
        str(tmp_path / "store" / "episode"),
        tables["episode"],
        mode="append",
        commit_properties=CommitProperties(custom_metadata=meta),
    )

    for s in (store, ml.open(tmp_path / "store", clock=clock)):
        assert visible(s, "episode").num_rows == 0
        assert s.lake.known_rows("episode").num_rows == 0
        assert present(s.get_fact("user:1", "plan", by=STEWARD)).record_id == before.record_id
        assert [h for h in s.recall("torn batch", by=STEWARD, k=50) if h.kind == "episode"] == []

    write_deltalake(
        str(tmp_path / "store" / "fact"),
        tables["fact"],
        mode="append",
        commit_properties=CommitProperties(custom_metadata=meta),
    )
    for s in (store, ml.open(tmp_path / "store", clock=clock)):
        assert visible(s, "episode").num_rows == 1
        assert present(s.get_fact("user:1", "plan", by=STEWARD)).value == "torn-but-whole"


def _rows_of_one_transaction(store: ml.MemoryStore):
    """Rows and commit metadata of a fact + episode transaction, built the way the writer builds them."""
    txn = new_txn_id()
    base = store.lake.known_rows("fact").drop_columns(
        [c for c in store.lake.known_rows("fact").column_names if c not in SPECS["fact"].schema.names]
    )
    fact_row = base.to_pylist()[0]
    fact_row.update(
        record_id="fac_" + "1" * 32, txn_id=txn, value='"torn-but-whole"', valid_from=day(2), content_hash="x" * 32
    )
    ep = episode("checkout", "torn batch", "fixed", day(2), scope=ORG)
    ep_row: dict[str, Any] = {name: None for name in SPECS["episode"].schema.names}
    ep_row.update(
        record_id="epi_" + "2" * 32,
        lineage_id="l" * 32,
        org="acme",
        subject="service:checkout",
        subject_key=subject_key("service:checkout"),
        valid_from=day(2),
        txn_id=txn,
        source="test",
        evidence=ep.evidence,
        authority="human_confirmed",
        status="active",
        derived_from=[],
        content_hash="y" * 32,
        generation=0,
        service="checkout",
        env="prod",
        symptom="torn batch",
        action="restart",
        outcome="fixed",
    )
    tables = {
        "fact": pa.Table.from_pylist([fact_row], schema=SPECS["fact"].schema),
        "episode": pa.Table.from_pylist([ep_row], schema=SPECS["episode"].schema),
    }
    meta = commit_metadata(
        txn_id=txn,
        committed_at=day(10),
        op="write",
        actor="backfill",
        reason=None,
        writers=["test"],
        kinds=["fact", "episode"],
        records=2,
    )
    return txn, tables, meta
