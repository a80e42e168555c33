"""Outside engines read the tables right: polars reads the Delta tables, the SQL of
docs/outside-engines.md runs over them, and the rows are exactly what the store serves,
now and at every past basis; `export` writes the same rows as a snapshot."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from _support import CURATOR, MEMBER, SIBLING, STEWARD, TIER2, SimClock, day, fact, present
from test_time_travel import tell_story

import memory_lakehouse as ml
from memory_lakehouse.cli import main as cli
from memory_lakehouse.outside import VISIBILITY_SQL, visibility_params
from memory_lakehouse.records import MEMORY_KINDS
from memory_lakehouse.time import Basis

pl = pytest.importorskip("polars")

DOC = Path(__file__).resolve().parents[1] / "docs" / "outside-engines.md"
READERS = (MEMBER, CURATOR, SIBLING, STEWARD)  # actor, team, another team's actor, org


def sql_of_the_doc() -> str:
    text = DOC.read_text(encoding="utf-8")
    return present(re.search(r"<!-- visibility-sql -->\s*```sql\n(.*?)```", text, re.S)).group(1)


class Outside:
    """An outside reader: DuckDB running the doc's SQL over the frames polars read."""

    def __init__(self, tables: dict) -> None:
        self.tables = tables
        self.sql = sql_of_the_doc()
        self.cons: dict[str, duckdb.DuckDBPyConnection] = {}

    def ids(self, kind: str, who: ml.Principal, basis: Basis) -> set[str]:
        con = self.cons.get(kind)
        if con is None:
            con = self.cons[kind] = duckdb.connect()
            con.register("rows", self.tables[kind].to_arrow())
            con.register("commits", self.tables["_commits"].to_arrow())
            con.register("ledger", self.tables["_ledger"].to_arrow())
        out = con.sql(self.sql, params=visibility_params(kind, who, basis)).to_arrow_table()
        return set(out.column("record_id").to_pylist())


def served_ids(store: ml.MemoryStore, kind: str, who: ml.Principal, basis: Basis) -> set[str]:
    return set(store.vis.rows(kind, who, basis).column("record_id").to_pylist())


def read_with_polars(root: str) -> dict:
    return {name: pl.read_delta(f"{root}/{name}") for name in (*MEMORY_KINDS, "_commits", "_ledger")}


@pytest.fixture
def world(tmp_path):
    clock = SimClock(day(0))
    store = ml.open(
        tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder(), maintenance=ml.MaintenancePolicy(None, None)
    )
    tell_story(store, clock)
    # one batch writing a slot twice at one valid_from: the later row supersedes the earlier
    store.write_many([fact("user:5", "plan", "first", day(11)), fact("user:5", "plan", "second", day(11))], by=MEMBER)
    store.write(fact("customer-728", "plan", "forgotten plan", day(11)), by=MEMBER)
    clock.advance(hours=1)
    store.forget("customer-728", by=STEWARD, reason="erasure request")  # forgotten, not yet purged
    clock.advance(hours=1)
    store.write(ml.Preference("user:42", "tone", "terse", day(11), source="chat", scope=TIER2), by=CURATOR)
    return store, clock


def test_the_doc_quotes_the_sql_the_library_ships():
    assert sql_of_the_doc().strip() == VISIBILITY_SQL.strip()


def test_polars_and_the_documented_sql_give_exactly_the_rows_the_store_serves_now_and_in_the_past(world):
    store, clock = world
    store.maintenance.record_commits()  # outside engines see system time as of the last record
    tables = read_with_polars(store.root)
    outside = Outside(tables)
    raw = tables["fact"]
    assert raw.filter(pl.col("subject") == "user:42").height > 1  # the raw table holds every version...
    now = store._basis()
    readings = sorted({c.committed_at for c in store.lake.commits() if c.is_memory})
    bases = (
        [now]
        + [Basis(t, t) for t in readings[::2]]
        + [Basis(t + timedelta(hours=5), t) for t in readings[1::4]]
        + [Basis(now.known_at, day(2)), Basis(day(4), day(20))]
    )
    checked = 0
    for kind in MEMORY_KINDS:
        for who in READERS:
            for basis in bases:
                assert outside.ids(kind, who, basis) == served_ids(store, kind, who, basis), (
                    kind,
                    who.id,
                    basis.describe(),
                )
                checked += 1
    assert checked > 150
    # ...the rules pick one: the current plan, the batch's later row, nothing of the forgotten subject
    facts = outside.ids("fact", MEMBER, now)
    assert store.get_fact("user:42", "plan", by=MEMBER).record_id in facts
    assert store.get_fact("user:5", "plan", by=MEMBER).value == "second"
    assert store.get_fact("user:5", "plan", by=MEMBER).record_id in facts
    assert not raw.filter(pl.col("subject") == "customer-728").filter(pl.col("record_id").is_in(list(facts))).height


def test_the_sql_stays_exact_after_maintenance_and_the_log_forgetting_old_commits(world):
    store, clock = world
    store.maintenance.compact()
    store.maintenance.checkpoint()
    store.maintenance.vacuum(retain=timedelta(0), dry_run=False)
    outside = Outside(read_with_polars(store.root))
    for basis in (store._basis(), Basis(day(4), day(4)), Basis(day(8), day(12))):
        for kind in MEMORY_KINDS:
            assert outside.ids(kind, CURATOR, basis) == served_ids(store, kind, CURATOR, basis)


def test_export_writes_the_served_rows_as_parquet_at_a_past_basis(world, tmp_path):
    store, clock = world
    report = store.export(tmp_path / "snap", by=MEMBER, as_of=day(4, 12))
    basis = Basis(day(4, 12), day(4, 12))
    for kind in MEMORY_KINDS:
        written = pq.read_table(report.files[kind])
        assert set(written.column("record_id").to_pylist()) == served_ids(store, kind, MEMBER, basis)
        assert written.num_rows == report.rows[kind]
        assert {"known_since", "commit_version"} <= set(written.column_names)
    plans = pq.read_table(report.files["fact"]).to_pylist()
    assert [r["value"] for r in plans if r["subject"] == "user:42" and r["attribute"] == "plan"] == ['"Enterprise Pro"']
    store.close()
    out = tmp_path / "cli-snap"
    assert (
        cli(
            [
                "export",
                "--store",
                store.root,
                "--as",
                "alice",
                "--scope",
                "acme/support/tier2/alice",
                "--as-of",
                day(4, 12).isoformat(),
                "--format",
                "parquet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert (
        pq.read_table(out / "fact.parquet").column("record_id").to_pylist()
        == pq.read_table(report.files["fact"]).column("record_id").to_pylist()
    )
