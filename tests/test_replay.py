"""store.replay: the same past decision replayed again sees the same rows."""

from __future__ import annotations

import pytest
from _support import CURATOR, MEMBER, day, episode, fact

import memory_lakehouse as ml


def test_replaying_one_decision_again_sees_the_same_rows(tmp_path, clock):
    """A lone decision replayed twice, and under another id, sees the same rows."""
    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    written = store.write(fact("customer:2", "plan", "Pro", day(0)), by=CURATOR)
    clock.advance(days=1)
    decision = [("d-1", MEMBER, "which plan", "customer:2", day(1))]
    first = store.replay(decision, kinds=["fact"])
    again = store.replay(decision, kinds=["fact"])
    assert first.visible.column("record_id").to_pylist() == [written.record_id]
    assert again.visible.to_pylist() == first.visible.to_pylist()
    assert store.replay([("d-2", MEMBER, "which plan", "customer:2", day(1))], kinds=["fact"]).visible.column(
        "decision_id"
    ).to_pylist() == ["d-2"]


def test_duckdb_draws_no_progress_bar_on_stdout(tmp_path):
    """DuckDB draws a bar on stdout for a query past two seconds (seen in the middle of the
    1M-record bench's JSON); the store's connection has it off, so `--json` output stays JSON.
    Checked in a process of its own: DuckDB turns the bar on by default there, not under
    pytest's captured output."""
    import subprocess
    import sys

    code = (
        "import sys, memory_lakehouse as ml; store = ml.open(sys.argv[1]); "
        "print(store.vis.con.sql(\"SELECT current_setting('enable_progress_bar')\").fetchall())"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[(False,)]"


def test_each_visible_row_carries_its_own_decisions_time(tmp_path, clock):
    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    for i in range(3):
        store.write(fact(f"customer:{i}", "plan", "Pro", day(0)), by=CURATOR)
    clock.advance(days=1)
    decisions = [(f"d-{i}", MEMBER, "which plan", None, day(1, i)) for i in range(4)]
    visible = store.replay(decisions, kinds=["fact"]).visible
    assert visible.num_rows == 12
    at = dict(zip([d[0] for d in decisions], [d[4] for d in decisions], strict=True))
    for row in visible.to_pylist():
        assert row["decided_at"] == at[row["decision_id"]]


def test_two_decisions_of_one_id_are_refused(tmp_path, clock):
    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    store.write(fact("customer:1", "plan", "Pro", day(0)), by=CURATOR)
    clock.advance(days=1)
    twice = [("d-1", MEMBER, "which plan", None, day(1)), ("d-1", MEMBER, "which plan", None, day(1, 2))]
    with pytest.raises(ml.ValidationError, match="appears more than once"):
        store.replay(twice, kinds=["fact"])


def test_a_replay_in_runs_of_decisions_sees_what_one_query_over_all_of_them_sees(tmp_path, clock, monkeypatch):
    """Decisions are replayed in runs whose visibility query stays small (`REPLAY_PAIRS`):
    the same rows in the same order, for decisions with and without a subject, of two orgs,
    at times before and after a supersession, for a kind whose heads the subject narrows
    first (facts) and one it narrows after (episodes)."""
    from memory_lakehouse import replay as replay_mod

    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    readers = {}
    for org in ("acme", "globex"):
        lead = ml.Principal(f"lead-{org}", ml.Scope(org), role="curator")
        readers[org] = ml.Principal(f"reader-{org}", ml.Scope(org, "support", "tier1", "r"), role="member")
        for i in range(6):
            store.write(fact(f"customer:{i}", "plan", f"Pro {i}", day(0, i), scope=ml.Scope(org)), by=lead)
            store.write(episode("api", f"timeouts {i}", "fixed", day(0, i), scope=ml.Scope(org)), by=lead)
        clock.advance(days=2)
        store.write(fact("customer:1", "plan", "Team", day(2), scope=ml.Scope(org)), by=lead)
    clock.advance(days=1)
    decisions = [
        (f"d-{n:02d}", readers[org], "which plan", subject, at)
        for n, (org, subject, at) in enumerate(
            (org, subject, at)
            for org in ("globex", "acme")
            for subject in (None, "customer:1")
            for at in (day(1), day(4))
        )
    ][::-1]  # not in id order
    store.vis.use_heads = False  # every decision by the query (the slot heads serve most: the next test)
    monkeypatch.setattr(replay_mod, "REPLAY_PAIRS", 10**9)
    whole = store.replay(decisions, kinds=["fact", "episode"])
    assert whole.visible.num_rows > 0
    for pairs in (1, 7, 30):
        monkeypatch.setattr(replay_mod, "REPLAY_PAIRS", pairs)
        runs = {
            kind: replay_mod._chunks(store.vis, kind, replay_mod.as_decisions(decisions))
            for kind in ("fact", "episode")
        }
        assert len(runs["episode"]) > 1 and all(len(run) >= 2 for run in runs["fact"] + runs["episode"])
        assert [d.decision_id for run in runs["episode"] for d in run] == sorted(d[0] for d in decisions)
        queries: list[str] = []
        with store.tracer(queries.append):
            parts = store.replay(decisions, kinds=["fact", "episode"])
        assert sum("WITH candidates" in q for q in queries) == len(runs["fact"]) + len(runs["episode"])
        assert parts.visible.to_pylist() == whole.visible.to_pylist()
        assert parts.per_decision().to_pylist() == whole.per_decision().to_pylist()


def test_a_replay_served_from_the_slot_heads_sees_what_the_query_sees(tmp_path, clock):
    """Decisions without a subject are served from the org's slot heads (no visibility
    query); those about a subject by the query, which reads only that subject's rows: the
    same rows, in order of decision id, as the query gives every decision. Readers at three
    depths of two orgs, before and after a supersession at a narrower scope, a retraction and
    a forget, for a kind whose slots hold the subject (facts) and one whose do not (episodes)."""
    from datetime import timedelta

    from memory_lakehouse.heads import SUBJECT_IN_SLOT

    assert "fact" in SUBJECT_IN_SLOT and "episode" not in SUBJECT_IN_SLOT
    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    readers = []
    for org in ("acme", "globex"):
        lead = ml.Principal(f"lead-{org}", ml.Scope(org), role="curator")
        team = ml.Scope(org, "support", "tier1")
        readers += [
            ml.Principal(f"all-{org}", ml.Scope(org), role="member"),
            ml.Principal(f"tier1-{org}", team, role="member"),
            ml.Principal(f"r-{org}", ml.Scope(org, "support", "tier1", "r"), role="member"),
        ]
        for i in range(5):
            store.write(fact(f"customer:{i}", "plan", f"Pro {i}", day(0, i), scope=ml.Scope(org)), by=lead)
            ep = episode("api", f"timeouts {i}", "fixed", day(0, i), scope=ml.Scope(org), subject=f"customer:{i % 2}")
            store.write(ep, by=lead)
        clock.advance(days=2)
        store.write(fact("customer:1", "plan", "Team", day(2), scope=team), by=lead)  # narrower: only tier1
        store.write(fact("customer:2", "plan", "Free", day(2), scope=ml.Scope(org)), by=lead)
        doomed = store.write(fact("customer:3", "seats", "9", day(2), scope=ml.Scope(org)), by=lead)
        clock.advance(days=1)
        store.retract(doomed.record_id, by=lead, reason="typo")
        store.forget("customer:4", by=ml.Principal(f"dpo-{org}", ml.Scope(org), role="steward"), reason="erasure")
    clock.advance(days=1)
    times = (day(1), day(2, 12), day(3, 12), clock.now + timedelta(hours=1))
    decisions = [
        (f"d-{n:03d}", reader, "which plan", subject, at)
        for n, (reader, subject, at) in enumerate(
            (reader, subject, at) for reader in readers for subject in (None, "customer:1") for at in times
        )
    ][::-1]  # not in id order
    kinds = ["fact", "episode"]
    queries: list[str] = []
    with store.tracer(queries.append):
        served = store.replay(decisions, kinds=kinds).visible
    asked = sum("WITH candidates" in q for q in queries)
    assert asked == 2  # the decisions about a subject, one run a kind; every other from the heads
    without_subject = sum(d[3] is None for d in decisions)
    assert sum("picked from the org's slot heads" in q for q in queries) == without_subject * len(kinds)
    store.vis.use_heads = False
    queried = store.replay(decisions, kinds=kinds).visible
    assert served.num_rows == queried.num_rows > 0

    def ids_of(table, kind):
        return [
            d for d, k in zip(table["decision_id"].to_pylist(), table["kind"].to_pylist(), strict=True) if k == kind
        ]

    for kind in kinds:  # in order of decision id within a kind, as the query orders them
        assert ids_of(served, kind) == sorted(ids_of(served, kind)) == ids_of(queried, kind)
    assert sorted(served.to_pylist(), key=str) == sorted(queried.to_pylist(), key=str)
    # the story shows: the narrower supersession only to tier1, the retraction and forget after them
    by_decision: dict[tuple[str, str], list[str]] = {}
    for d, kind, text in zip(*(served[c].to_pylist() for c in ("decision_id", "kind", "search_text")), strict=True):
        by_decision.setdefault((d, kind), []).append(text)
    number = {(reader.id, subject, at): d for d, reader, _, subject, at in decisions}
    assert not by_decision.get((number[("all-globex", None, day(1))], "fact"))  # globex wrote after day 1
    assert len(by_decision[(number[("r-acme", "customer:1", day(3, 12))], "episode")]) == 2  # queried
    plan = lambda who, at: by_decision[(number[(who, "customer:1", at)], "fact")]  # noqa: E731
    assert any("Team" in t for t in plan("r-acme", day(3, 12))) and not any(
        "Team" in t for t in plan("all-acme", day(3, 12))
    )
    assert any("Pro 1" in t for t in plan("r-acme", day(1)))
    facts = lambda who, at: " ".join(by_decision.get((number[(who, None, at)], "fact"), []))  # noqa: E731
    assert "customer:0" in facts("all-acme", day(1)) and "customer:0" in facts("all-globex", day(3, 12))
    assert not any("customer:4" in t for texts in by_decision.values() for t in texts)  # forgotten: at any basis
    assert "9" in facts("tier1-acme", day(2, 12)) and "seats" not in facts("tier1-acme", day(3, 12))


def test_a_row_many_decisions_see_is_stored_once_in_the_result(tmp_path, clock):
    """The result names a row once per decision that sees it; its strings are dictionary-encoded
    over the distinct rows, and read back as the plain take of every (decision, row) pair
    does, in the naive replay too."""
    import pyarrow as pa

    from memory_lakehouse import replay as replay_mod
    from memory_lakehouse.query import bases_table
    from memory_lakehouse.time import Basis

    store = ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())
    for i in range(4):
        store.write(fact(f"customer:{i}", "plan", f"Pro {i}", day(0, i), evidence=f"ticket {i}"), by=CURATOR)
    clock.advance(days=1)
    decisions = replay_mod.as_decisions([(f"d-{n}", MEMBER, "which plan", None, day(1, n)) for n in range(5)])
    result = store.replay(decisions, kinds=["fact"])
    visible = result.visible
    assert visible.num_rows == 20
    strings = [f.name for f in visible.schema if pa.types.is_dictionary(f.type)]
    assert set(strings) == {"decision_id", "record_id", "lineage_id", "kind", "subject", "search_text"} | {
        "source",
        "authority",
    }
    for name in ("record_id", "search_text"):
        assert sum(len(chunk.dictionary) for chunk in visible.column(name).chunks) == 4
    assert sum(len(chunk.dictionary) for chunk in visible.column("authority").chunks) == 1
    bases = bases_table([(d.decision_id, d.principal, Basis(d.decided_at, d.decided_at), None) for d in decisions])
    plain = store.vis.visible("fact", bases, columns=replay_mod.ROW_COLUMNS)  # the same query, each pair taken
    assert not any(pa.types.is_dictionary(f.type) for f in plain.schema)
    assert (
        visible.select([*replay_mod.ROW_COLUMNS, "decision_id"]).to_pylist()
        == plain.select([*replay_mod.ROW_COLUMNS, "decision_id"]).to_pylist()
    )
    naive = store.replay(decisions, kinds=["fact"], naive=True).visible
    assert naive.schema == visible.schema
    assert sorted(naive.select(["decision_id", "record_id", "search_text"]).to_pylist(), key=str) == sorted(
        visible.select(["decision_id", "record_id", "search_text"]).to_pylist(), key=str
    )
    assert result.to_polars().height == 20
    assert result.per_decision().column("visible_rows").to_pylist() == [4] * 5
