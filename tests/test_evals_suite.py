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
SMALL = {"temporal.customers": 4, "temporal.tickets": 4}


def ctx(tmp_path: Path, wrap=core.identity) -> core.Context:
    return core.Context(quick=True, embedder=ml.HashingEmbedder(dim=128), wrap=wrap, workdir=tmp_path,
                        seeds=dict(TEST_SEEDS), sizes=dict(SMALL))


def run(name: str, tmp_path: Path, wrap=core.identity) -> core.EvalResult:
    c = ctx(tmp_path, wrap)
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
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
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
