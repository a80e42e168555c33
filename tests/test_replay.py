"""store.replay: the same past decision replayed again sees the same rows."""

from __future__ import annotations

import pytest
from _support import CURATOR, MEMBER, day, fact

import memory_lakehouse as ml


def test_replaying_one_decision_again_sees_the_same_rows(tmp_path, clock):
    """A single decision is one remembered read: the second replay is answered from it."""
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
