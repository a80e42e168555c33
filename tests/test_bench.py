"""The benchmark: the recall run reports what serving its store costs in a fresh process."""

from __future__ import annotations

import logging
import os
import resource
import tempfile
from importlib import metadata

import pytest
from _support import present

from memory_lakehouse import bench


@pytest.mark.slow
@pytest.mark.integration
def test_the_recall_bench_reports_the_peak_rss_of_serving_from_a_fresh_process(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="memory_lakehouse")
    out = bench.run(400, quick=True, root=str(tmp_path / "store"), recall=True, embedder="hashing")
    phases = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bench: ")]
    assert phases[0] == "bench: 2 steps" and "bench: serving from a fresh process (1 of 2 steps done)" in phases
    assert 0 < out["peak_rss_serving_mb"] <= out["peak_rss_serving_all_orgs_mb"]
    assert out["serving"]["peak_rss_mb"] == out["peak_rss_serving_mb"]
    for kind in ("recall_now", "recall_as_of_midpoint", "recall_selective_1pct"):
        assert out["serving"][kind]["p50_ms"] > 0
    assert out["environment"]["packages"]["duckdb"] == metadata.version("duckdb")
    peaks = out["recall"]["peak_rss_mb_after"]
    assert peaks["ingest"] <= peaks["index_build"] <= peaks["recall"] <= out["peak_rss_mb"]


@pytest.mark.integration
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM is Linux's")
def test_a_fresh_process_reports_its_own_peak_not_its_parents():
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(range(0, len(ballast), 4096))  # resident, not just reserved
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = bench.in_fresh_process(bench.own_peak_rss_mb)
    del ballast
    # ru_maxrss in the child would be at least the parent's peak: Linux carries it across exec
    assert child < parent - 200


def test_the_peak_never_reads_lower_than_an_earlier_reading(monkeypatch):
    """Linux's VmHWM can read lower later (pages handed back by madvise leave no record)."""
    readings = iter([212.2, 212.0, 213.5])
    monkeypatch.setattr(bench, "_vm_hwm_mb", lambda: next(readings))
    monkeypatch.setattr(bench, "_greatest_reading", 0.0)
    assert [bench.own_peak_rss_mb() for _ in range(3)] == [212.2, 212.2, 213.5]


@pytest.mark.slow
@pytest.mark.integration
def test_the_tenants_bench_runs_the_store_and_the_floor_on_the_same_workload_and_removes_its_store(
    tmp_path, monkeypatch
):
    from memory_lakehouse import bench_tenants

    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout: scripts/
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the run's own store goes
    out = bench_tenants.run(2000, rounds=5)
    assert not list(tmp_path.iterdir()), "the run's temp store is left behind"
    store, floor = out["store"], out["floor"]
    assert floor is not None and floor["recall_now_new_actor"]["n"] == 5
    assert floor["delta_rss_peak_mb"] > 0 and "delta_rss_peak_in_the_stores_process_mb" in floor  # spawned
    assert store["recall_now_new_actor"]["n"] == store["get_fact_new_actor"]["n"] == 5
    assert store["as_of_leaks"] == 0 and store["replay"]["leaked_decisions"] == 0
    assert store["top_k_starved"] == 0 and store["get_fact_hit_rate"] == 1.0
    # the round with a forget in the ledger: its writes supersede a slot, its reads follow a write
    assert store["single_write_superseding_with_a_forget_in_the_ledger"]["superseded"] == 5
    assert store["recall_first_after_own_org_write_with_a_forget_in_the_ledger"]["n"] == 5
    # a capture's fact and preference in one commit, then the first recalls after it
    assert (
        store["write_many_fact_and_preference"]["n"] == store["recall_first_after_mixed_kind_write_other_org"]["n"] == 5
    )
    # an agent's other writes: a proposal approved, then retracted, and a capture; each
    # approval's value is served to the org's next new actor, each retraction hides it
    for key in ("propose_by_an_agent", "approve_by_a_lead", "get_fact_first_after_an_approval", "retract_by_a_lead"):
        assert store[key]["n"] == 5, key
    assert store["get_fact_first_after_a_retraction"]["n"] == store["capture_of_four_turns"]["n"] == 5
    assert store["approved_not_served"] == 0 and store["retracted_served"] == 0
    # reads at past bases of their own need each org's history: read by a query once, then picked
    cache = store["read_cache"]
    assert cache["history_queries"] >= 1 and cache["history_picks"] >= 1 and cache["bound_mb"] == 512
    # a restart: the store the run left, then compacted, opened in processes of their own
    again, compacted = store["reopen"], store["reopen_compacted"]
    assert again["fact_rows"] == compacted["fact_rows"] == store["fact_rows_at_close"]
    assert again["first_get_fact_found"] and compacted["first_get_fact_found"]
    assert compacted["fact_files"] == 20 < again["fact_files"] == compacted["compacted_files_removed"]
    table = bench_tenants.markdown(out)
    assert "| recall p50, each query a new actor (ms) |" in table and "store / floor" in table
    # what the figures depend on beside the code: a slower machine or another version is visible
    env = out["environment"]
    assert env["packages"]["pyarrow"] == metadata.version("pyarrow") and env["cores"] == os.cpu_count()
    assert f"pyarrow {metadata.version('pyarrow')}" in table and f"Python {env['python']}" in table
    assert "| recall p50, first after a fact + preference commit, another org (ms) |" in table
    assert "| retract p50, by a lead (ms) |" in table and "approvals not served: 0, retractions served: 0" in table
    assert f"| {cache['history_queries']} ({cache['history_picks']}) |" in table
    assert f"| reopened in a process of its own, compacted (20 fact files): open (s) | {compacted['open_s']} |" in table


def test_the_tenants_bench_runs_the_store_with_the_read_cache_bound_it_is_given(tmp_path, monkeypatch, capsys):
    """`memlake bench --workload tenants --read-cache-mb N` opens its store with that bound (a
    store bigger than its read caches, at a size that builds in seconds); the option is the
    tenants workload's only."""
    from memory_lakehouse import bench_tenants

    seen: list[dict[str, object]] = []

    def run(records, **options):
        seen.append(options)
        return {}

    monkeypatch.setattr(bench_tenants, "run", run)
    monkeypatch.setattr(bench_tenants, "markdown", lambda result: "")
    bench.main(["--workload", "tenants", "--records", "2000", "--quick", "--read-cache-mb", "3"])
    assert seen == [{"root": None, "rounds": 50, "read_cache_bytes": 3 * 2**20}]
    with pytest.raises(SystemExit):
        bench.main(["--records", "2000", "--read-cache-mb", "3"])
    assert "--read-cache-mb is an option of --workload tenants" in capsys.readouterr().err
    out = bench_tenants.run_store(2000, str(tmp_path / "s"), rounds=5, read_cache_bytes=2**20)
    assert out["read_cache"]["bound_mb"] == 1.0 and out["read_cache"]["history_queries"] >= 1


def test_the_tenants_workload_supersedes_a_fifth_of_its_slots_and_mixes_orgs_in_a_batch():
    from memory_lakehouse.bench_tenants import BATCH, Workload

    work = Workload()
    records = [work.record(i) for i in range(6 * BATCH)]
    slots = {(f.subject, f.attribute, f.scope) for f, _, _ in records}
    superseding = len(records) - len(slots)
    assert abs(superseding / len(slots) - 0.2) < 0.05
    scopes = [present(f.scope) for f, _, _ in records]  # the workload scopes every record
    assert len({s.org for s in scopes[:BATCH]}) == 20
    assert len({by.id for _, by, _ in records[:BATCH]}) > 100
    levels = {s.depth for s in scopes if s.org == "org03"}
    assert levels == {1, 3, 4}


def test_the_floor_s_search_serves_the_rows_its_sql_rule_selects():
    """The floor answers with numpy masks over columns read from its SQLite table: at every
    basis, for every actor, the rows its one SQL statement of the rule selects, best first."""
    import random
    from datetime import timedelta
    from pathlib import Path

    import numpy as np

    from memory_lakehouse.bench_tenants import BATCH, T0, Workload, _actors, load_floor
    from memory_lakehouse.embed import HashingEmbedder

    module = load_floor(str(Path(__file__).resolve().parents[1] / "scripts" / "floor_sqlite.py"))
    assert module is not None
    floor, work, embedder, known = module.Floor(), Workload(), HashingEmbedder(dim=64), T0
    commits = []
    for start in range(0, 4 * BATCH, BATCH):
        rows = [work.record(i)[2] for i in range(start, start + BATCH)]
        known = max(known, rows[-1]["valid_from"] + timedelta(hours=1))
        floor.ingest(rows, embedder.embed([r["text"] for r in rows]), known)
        commits.append(known)
    rng = random.Random(11)
    for i, (org, team, actor) in enumerate(_actors(rng, 40)):
        actor = f"{org}-{team}-{actor}"
        # at a commit (a boundary of known and superseded intervals) or between
        at = commits[i % 4] if i % 2 else known - timedelta(hours=rng.randrange(0, 80))
        t = module._us(at)
        selected = floor.db.execute(
            "SELECT id, vec FROM facts WHERE org = ? AND (team IS NULL OR team = ?) AND (actor IS NULL OR actor = ?) "
            "AND known_since <= ? AND (superseded_at IS NULL OR superseded_at > ?) AND valid_from <= ?",
            (org, team, actor, t, t, t),
        ).fetchall()
        q = np.asarray(embedder.embed([f"plan {rng.randrange(100)}"])[0], np.float32)
        found = floor.search(q, org=org, team=team, actor=actor, at=at, k=len(selected) + 5)
        assert sorted(found) == sorted(rid for rid, _ in selected)
        scores = {rid: float(floor._matrix(org)[vec] @ q) for rid, vec in selected}
        assert [round(scores[r], 5) for r in found] == sorted((round(s, 5) for s in scores.values()), reverse=True)
