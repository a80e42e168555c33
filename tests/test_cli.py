"""`memlake` is a thin layer: each command makes one library call, prints text or JSON,
and turns library errors into one line and exit status 2."""

import json

import pytest

from memory_lakehouse.cli import main

AS_ALICE = ["--as", "alice", "--scope", "acme/support", "--role", "curator"]
AS_DPO = ["--as", "dpo", "--scope", "acme", "--role", "steward"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "store")
    assert run(capsys, "init", "--store", path)[0] == 0
    lines = [
        {
            "kind": "fact",
            "subject": "user:42",
            "attribute": "plan",
            "value": "Free Starter",
            "valid_from": "2026-09-01T09:00:00Z",
            "source": "user_explicit",
        },
        {
            "kind": "fact",
            "subject": "user:42",
            "attribute": "plan",
            "value": "Enterprise Pro",
            "valid_from": "2026-09-14T09:00:00Z",
            "source": "user_explicit",
        },
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines))
    code, out, _ = run(capsys, "write", "--store", path, "--file", str(src), *AS_ALICE)
    assert code == 0 and "superseded" in out
    return path


def test_write_then_fact_reads_the_current_value_and_the_past_one(store, capsys):
    code, out, _ = run(capsys, "fact", "user:42", "plan", "--store", store, *AS_ALICE)
    assert code == 0 and "Enterprise Pro" in out
    code, out, _ = run(
        capsys, "fact", "user:42", "plan", "--store", store, *AS_ALICE, "--valid-at", "2026-09-05T00:00:00Z", "--json"
    )
    assert code == 0 and json.loads(out)["value"] == "Free Starter"


def test_recall_json_carries_score_why_and_record(store, capsys, monkeypatch):
    code, out, _ = run(
        capsys, "recall", "what plan is the user on", "--store", store, *AS_ALICE, "--subject", "user:42", "--json"
    )
    hits = json.loads(out)
    assert code == 0 and [h["record"]["value"] for h in hits] == ["Enterprise Pro"]
    assert hits[0]["why"] and "score" in hits[0]


def test_a_sibling_scope_sees_nothing_from_the_cli_either(store, capsys):
    code, out, _ = run(capsys, "recall", "plan", "--store", store, "--as", "bob", "--scope", "acme/sales")
    assert code == 0 and "nothing visible" in out


def test_library_errors_are_one_line_and_exit_2(store, capsys):
    code, out, err = run(capsys, "fact", "user:42", "plan", "--store", store, *AS_ALICE, "--as-of", "2026-09-05T10:00")
    assert code == 2 and err.count("\n") == 1 and "ValidationError" in err and "no time zone" in err
    code, _, err = run(capsys, "audit", "--subject", "user:42", "--store", store, *AS_ALICE)
    assert code == 2 and "PermissionDenied" in err


def test_policy_resolve_prints_the_decision_and_its_explanation(store, capsys):
    src = (
        '{"kind":"policy","policy_id":"returns","text":"Orders can be returned within 30 days.",'
        '"conditions":{"market":"US"},"effective_from":"2026-01-01T00:00:00Z","source":"policy-doc@v1"}'
    )
    import io
    import sys

    sys_stdin = sys.stdin
    try:
        sys.stdin = io.StringIO(src)
        assert run(capsys, "write", "--store", store, "--as", "legal", "--scope", "acme", "--role", "curator")[0] == 0
    finally:
        sys.stdin = sys_stdin
    code, out, _ = run(
        capsys,
        "policy",
        "resolve",
        "--facts",
        '{"market": "US"}',
        "--at",
        "2026-09-05T00:00:00Z",
        "--store",
        store,
        *AS_ALICE,
        "--json",
    )
    decision = json.loads(out)
    assert code == 0 and decision["rule"] == "only match" and "returns" in decision["explanation"]


def test_forget_then_purge_is_a_dry_run_unless_yes(store, capsys):
    assert run(capsys, "forget", "user:42", "--reason", "erasure request", "--store", store, *AS_DPO)[0] == 0
    code, out, _ = run(capsys, "purge", "--store", store, *AS_DPO)
    assert code == 0 and "dry run" in out
    code, out, _ = run(capsys, "purge", "--store", store, *AS_DPO, "--yes", "--json")
    report = json.loads(out)
    assert code == 0 and report["dry_run"] is False and report["verified"] is True and report["rows"]["fact"] == 2
    code, out, _ = run(capsys, "audit", "--subject", "user:42", "--store", store, *AS_DPO, "--json")
    assert [e["operation"] for e in json.loads(out)][-2:] == ["forget", "purge"]


def test_replay_reports_the_leakage_rate(store, capsys, tmp_path):
    src = tmp_path / "decisions.jsonl"
    src.write_text(json.dumps({"decision_id": "d1", "decided_at": "2026-09-05T00:00:00Z", "subject": "user:42"}))
    code, out, _ = run(capsys, "replay", "--file", str(src), "--store", store, *AS_ALICE, "--json")
    assert code == 0 and json.loads(out)["leakage_rate"] == 0.0
    code, out, _ = run(capsys, "replay", "--file", str(src), "--store", store, *AS_ALICE, "--naive", "--json")
    assert json.loads(out)["leakage_rate"] == 1.0


@pytest.mark.integration
def test_bench_takes_the_recall_figures_flags_and_prints_json(tmp_path, capsys):
    code, out, _ = run(
        capsys,
        "bench",
        "--records",
        "300",
        "--recall",
        "--embedder",
        "hashing",
        "--quick",
        "--store",
        str(tmp_path / "bench"),
    )
    figures = json.loads(out)
    assert code == 0 and figures["store"] == str(tmp_path / "bench")
    assert figures["recall"]["recall_now"]["p50_ms"] > 0 and figures["peak_rss_serving_mb"] > 0
