"""The behavioural eval suite: each eval passes on the store, and fails on a deliberately broken one.

Small generated datasets with seeds the suite itself never uses (`TEST_SEEDS`), the
hashing embedder: each eval's run takes seconds.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

import memory_lakehouse as ml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evals/ is a top-level package of the repository

from evals import broken, core, scorecard, suite  # noqa: E402

TEST_SEEDS = {name: 7 + n for n, name in enumerate(core.SEEDS)}
SMALL = {
    "temporal.customers": 4,
    "temporal.tickets": 4,
    "knowledge_update.users": 8,
    "provenance.incidents": 12,
    "forgetting.forgotten": 2,
    "forgetting.kept": 2,
    "scope.accounts": 2,
    "scope.customers": 6,
    "scope.questions": 30,
}


def ctx(tmp_path: Path, wrap=core.identity, **sizes: int) -> core.Context:
    return core.Context(
        quick=True,
        embedder=ml.HashingEmbedder(dim=128),
        wrap=wrap,
        workdir=tmp_path,
        seeds=dict(TEST_SEEDS),
        sizes={**SMALL, **sizes},
    )


def run(name: str, tmp_path: Path, wrap=core.identity, **sizes: int) -> core.EvalResult:
    c = ctx(tmp_path, wrap, **{k.replace("__", "."): v for k, v in sizes.items()})
    try:
        return suite.runner(name)(c)
    finally:
        c.close()


def metric(result: core.EvalResult, prefix: str) -> core.Metric:
    return next(m for m in result.metrics if m.name.startswith(prefix))


def test_test_seeds_are_not_the_suites_seeds():
    assert not set(TEST_SEEDS.values()) & set(core.SEEDS.values())


def test_the_naive_baseline_uses_none_of_the_librarys_rules():
    tree = ast.parse((ROOT / "evals" / "naive.py").read_text(encoding="utf-8"))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not [m for m in imported if m.startswith("memory_lakehouse") or m.startswith(".")], imported


# ---------------------------------------------------------------- temporal


def test_temporal_replay_leaks_nothing_while_naive_memory_reads_the_answer_key(tmp_path):
    result = run("temporal", tmp_path)
    assert result.passed, result.failures()
    leak = metric(result, "leakage rate")
    assert leak.ours == 0 and leak.naive is not None and leak.naive > 0
    scores = result.details["scores"]
    assert scores["replay"] == scores["production"] < scores["naive"]


def test_temporal_fails_on_a_store_that_ignores_as_of(tmp_path):
    result = run("temporal", tmp_path, broken.IgnoresAsOf)
    assert not result.passed
    assert metric(result, "leakage rate").passed is False


# ---------------------------------------------------------------- knowledge update, provenance, scope


def test_knowledge_update_serves_no_stale_value_while_naive_memory_does(tmp_path):
    result = run("knowledge_update", tmp_path)
    assert result.passed, result.failures()
    stale = metric(result, "stale-serve rate")
    assert stale.ours == 0 and stale.naive is not None and stale.naive > 0


def test_knowledge_update_fails_on_a_store_that_serves_every_version(tmp_path):
    result = run("knowledge_update", tmp_path, broken.ServesEveryVersion)
    assert metric(result, "stale-serve rate").passed is False
    assert metric(result, "stale items").passed is False


def test_provenance_is_complete_here_and_the_naive_memory_serves_items_without_evidence(tmp_path):
    result = run("provenance", tmp_path)
    assert result.passed, result.failures()
    share = metric(result, "served items carrying")
    assert share.ours == 1 and share.naive is not None and share.naive < 1


def test_provenance_fails_on_a_store_that_drops_provenance(tmp_path):
    result = run("provenance", tmp_path, broken.DropsProvenance)
    assert metric(result, "served items carrying").passed is False


def test_a_context_line_cut_to_the_budget_still_counts_as_citing_its_evidence(tmp_path):
    from _support import CURATOR, MEMBER, day, episode

    from evals.provenance import cited_evidence

    store = ml.open(tmp_path / "store", embedder=ml.HashingEmbedder())
    long_symptom = "checkout latency spikes " + "after the deploy of the pricing service " * 40
    store.write(episode("checkout", long_symptom, "fixed", day(1), source="pd", evidence="pd:INC-7"), by=CURATOR)

    block = store.context("checkout latency", by=MEMBER, budget_tokens=80)

    (line,) = block.splitlines()[1:]
    assert line.endswith("; cut]")  # the case the eval used to miss: the citation is not the last part
    assert cited_evidence(line) == "pd:INC-7"


def test_scope_isolation_serves_no_cross_scope_item_while_naive_memory_does(tmp_path):
    result = run("scope", tmp_path)
    assert result.passed, result.failures()
    cross = metric(result, "cross-scope items served (count)")
    assert cross.ours == 0 and cross.naive is not None and cross.naive > 0


def test_scope_isolation_fails_on_a_store_that_widens_scope(tmp_path):
    result = run("scope", tmp_path, broken.WidensScope, scope__questions=12)
    assert metric(result, "cross-scope items served (count)").passed is False


# ---------------------------------------------------------------- forgetting


def test_forgetting_serves_nothing_and_leaves_no_byte_after_purge(tmp_path):
    result = run("forgetting", tmp_path)
    for prefix in (
        "items of forgotten customers served",
        "canary occurrences a byte scan finds",
        "canary occurrences after the restored",
        "customers not forgotten",
    ):
        assert metric(result, prefix).passed, result.failures()
    attempts = result.details["attempts"]
    assert attempts["stale worker"] == 0 and attempts["backup restore"] == 0, attempts
    assert all(n == result.details["forgotten"] for n in result.details["naive_attempts"].values())


def test_forgetting_fails_on_a_store_that_skips_the_tombstone_check(tmp_path):
    result = run("forgetting", tmp_path, broken.SkipsTombstones)
    assert metric(result, "items of forgotten customers served").passed is False
    assert metric(result, "canary occurrences a byte scan finds").passed is False


# ---------------------------------------------------------------- the scorecard and the runner


def _fake(passed: bool) -> core.EvalResult:
    gate = core.Gate("ours", "==", 0)
    return core.EvalResult("fake", "generated (seed 1)", [core.Metric("leaks", 0.0 if passed else 0.5, 0.4, (gate,))])


def test_the_scorecard_has_json_a_table_and_a_plot_and_labels_every_number(tmp_path):
    pytest.importorskip("matplotlib")
    card = scorecard.card([_fake(True)], commit="abc123", mode="quick", data=None, embedder="hashing")
    written = scorecard.write(card, tmp_path / "out")
    assert sorted(p.name for p in written) == ["scorecard.json", "scorecard.md", "scorecard.png"]
    saved = json.loads((tmp_path / "out" / "scorecard.json").read_text())
    assert saved["commit"] == "abc123" and all(m["data"] for e in saved["evals"] for m in e["metrics"])
    row = next(line for line in (tmp_path / "out" / "scorecard.md").read_text().splitlines() if "| leaks |" in line)
    assert "generated (seed 1)" in row and "abc123" in row
    assert (tmp_path / "out" / "scorecard.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("passed, code", [(True, 0), (False, 1)])
def test_memlake_eval_exits_non_zero_when_a_gate_fails(monkeypatch, tmp_path, capsys, passed, code):
    monkeypatch.setitem(suite.EVALS, "fake", "fake")
    monkeypatch.setattr(suite, "runner", lambda name: lambda c: _fake(passed))
    from memory_lakehouse.cli import main

    with pytest.raises(SystemExit) if code else _nothing():
        assert main(["eval", "fake", "--quick", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "scorecard.json").read_text())["passed"] is passed


def test_an_unknown_eval_is_one_line_and_exit_2(capsys):
    assert suite.main(["no-such-eval"]) == 2
    assert "no eval named no-such-eval" in capsys.readouterr().err


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_commit_label_is_a_revision_or_unknown(tmp_path):
    assert core.commit_label(tmp_path) == "unknown"
    assert core.commit_label() != ""


# ---------------------------------------------------------------- policy, contradiction, skew, abstention


def test_policy_resolution_is_exact_on_every_kind_of_order(tmp_path):
    result = run("policy", tmp_path, policy__orders=30)
    assert result.passed, result.failures()
    assert result.details["per_category"]["ties escalated"]["n"] > 0


def test_policy_fails_on_a_store_that_ignores_known_at(tmp_path):
    result = run("policy", tmp_path, broken.IgnoresAsOf, policy__orders=30)
    assert metric(result, "accuracy: late arrival, asked as known then").passed is False


def test_contradiction_serves_no_disagreeing_items_while_naive_memory_does(tmp_path):
    result = run("contradiction", tmp_path, contradiction__accounts=6)
    assert result.passed, result.failures()
    assert (metric(result, "questions whose served items disagree").naive or 0) > 0


def test_contradiction_fails_on_a_store_that_serves_every_version(tmp_path):
    result = run("contradiction", tmp_path, broken.ServesEveryVersion, contradiction__accounts=6)
    assert metric(result, "questions whose served items disagree").passed is False


def test_skew_replay_sees_nothing_of_a_later_backfill_while_naive_memory_does(tmp_path):
    result = run("skew", tmp_path, skew__customers=6)
    assert result.passed, result.failures()


def test_skew_fails_on_a_store_that_ignores_as_of(tmp_path):
    result = run("skew", tmp_path, broken.IgnoresAsOf, skew__customers=6)
    assert metric(result, "share of replay-served items from backfill").passed is False


def test_abstention_beats_the_naive_memory(tmp_path):
    result = run("abstention", tmp_path, abstention__members=12, abstention__lme=12)
    assert result.passed, result.failures()


@pytest.mark.parametrize("wrap", [broken.IgnoresAsOf, broken.SkipsTombstones, broken.WidensScope])
def test_abstention_fails_on_a_store_that_serves_what_is_out_of_reach(tmp_path, wrap):
    result = run("abstention", tmp_path, wrap, abstention__members=12, abstention__lme=12)
    assert not result.passed


# ---------------------------------------------------------------- retrieval (wraps evals/retrieval.py)


def test_retrieval_in_the_suite_serves_no_distractor_and_fails_on_a_store_that_serves_every_version(tmp_path):
    ok = run("retrieval", tmp_path / "ok")
    assert metric(ok, "distractor hits").passed, ok.failures()
    naive = metric(ok, "distractor hits").naive
    assert naive is not None and naive > 0
    bad = run("retrieval", tmp_path / "bad", broken.ServesEveryVersion)
    assert metric(bad, "distractor hits").passed is False


def test_the_full_run_shows_each_eval_and_its_cases_and_quick_and_quiet_runs_draw_no_bar(monkeypatch, tmp_path, capsys):
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def fake(ctx: core.Context) -> core.EvalResult:
        for case in range(3):
            ctx.tick("fake", case + 1, 3)
        return _fake(True)

    monkeypatch.setitem(suite.EVALS, "fake", "fake")
    monkeypatch.setattr(suite, "runner", lambda name: fake)
    runs = {}
    for name, flags in {"full": [], "quick": ["--quick"], "quiet": ["--quiet"]}.items():
        screen = Terminal()
        monkeypatch.setattr(sys, "stderr", screen)
        assert suite.main(["fake", "--embedder", "hashing", "--json", *flags]) == 0
        runs[name] = screen.getvalue()
        json.loads(capsys.readouterr().out)  # stdout: the scorecard alone
    assert "eval: fake" in runs["full"] and "━" in runs["full"]
    assert "━" not in runs["quick"] and "━" not in runs["quiet"]


def test_memlake_eval_quiet_prints_no_progress_lines_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    monkeypatch.setitem(suite.EVALS, "fake", "fake")
    monkeypatch.setattr(suite, "runner", lambda name: lambda c: _fake(True))
    from memory_lakehouse.cli import main

    assert main(["eval", "fake", "--embedder", "hashing", "--json"]) == 0
    assert "memlake: eval: fake" in capsys.readouterr().err  # the full run says what it runs
    assert main(["eval", "fake", "--embedder", "hashing", "--json", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
