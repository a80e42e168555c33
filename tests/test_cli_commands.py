"""Every `memlake` command has help and a test: the governed workflow (propose, approve, retract),
the reads (context, get, list, history, pending, schema), the principal from the environment or
a profile, and the output of write and replay."""

from __future__ import annotations

import argparse
import json
from datetime import UTC

import pytest

import memory_lakehouse as ml
from memory_lakehouse.cli import build_parser, main

AS_LEAD = ["--as", "lead", "--scope", "acme/support", "--role", "curator"]
AS_BOT = ["--as", "bot", "--scope", "acme/support/bot", "--role", "agent"]
AS_DPO = ["--as", "dpo", "--scope", "acme", "--role", "steward"]

PLAN = {
    "kind": "fact",
    "subject": "user:42",
    "attribute": "plan",
    "value": "Free Starter",
    "valid_from": "2026-09-01T09:00:00Z",
    "source": "user_explicit",
}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_principal_from_the_environment(monkeypatch):
    for name in ("MEMLAKE_AS", "MEMLAKE_SCOPE", "MEMLAKE_ROLE", "MEMLAKE_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def path(tmp_path, capsys):
    p = str(tmp_path / "store")
    assert run(capsys, "init", "--store", p)[0] == 0
    src = tmp_path / "in.jsonl"
    src.write_text(
        "\n".join(
            json.dumps({**PLAN, "value": v, "valid_from": f"2026-09-{d:02d}T09:00:00Z"})
            for v, d in (("Free Starter", 1), ("Enterprise Pro", 14))
        )
    )
    code, out, _ = run(capsys, "write", "--store", p, "--file", str(src), *AS_LEAD)
    assert code == 0
    return p


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _commands(sub)
                found.update({f"{name} {k}": v for k, v in nested.items()} if nested else {name: sub})
    return found


def test_every_command_and_every_flag_has_help():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in subparsers._choices_actions}
    for name in subparsers.choices:
        assert helps.get(name), f"`memlake {name}` has no help line"
    for name, sub in _commands(parser).items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"`memlake {name}` {action.option_strings or action.dest} has no help"


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["recall", "--help"])
    out = capsys.readouterr().out
    assert "(default: data/store)" in out and "(default: 8)" in out


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and ml.__version__ in capsys.readouterr().out


def test_write_prints_a_summary_and_verbose_prints_each_record(path, tmp_path, capsys):
    src = tmp_path / "more.jsonl"
    src.write_text("\n".join(json.dumps({**PLAN, "subject": f"user:{i}"}) for i in range(5)))
    code, out, _ = run(capsys, "write", "--store", path, "--file", str(src), *AS_LEAD)
    assert code == 0 and out.count("\n") == 1 and "5 record(s): 5 inserted" in out
    code, out, _ = run(capsys, "write", "--store", path, "--file", str(src), *AS_LEAD, "--verbose")
    assert code == 0 and out.count("duplicate") == 6  # five lines and the summary


def test_a_missing_scope_is_refused_not_written_to_an_org_named_default(path, capsys):
    code, _, err = run(capsys, "fact", "user:42", "plan", "--store", path)
    assert code == 2 and "no scope" in err and err.count("\n") == 1


def test_the_principal_comes_from_the_environment(path, capsys, monkeypatch):
    monkeypatch.setenv("MEMLAKE_AS", "lead")
    monkeypatch.setenv("MEMLAKE_SCOPE", "acme/support")
    code, out, _ = run(capsys, "fact", "user:42", "plan", "--store", path)
    assert code == 0 and "Enterprise Pro" in out


def test_the_principal_comes_from_a_profile_and_flags_override_it(path, tmp_path, capsys, monkeypatch):
    profile = tmp_path / "me.json"
    profile.write_text(json.dumps({"as": "bob", "scope": "acme/sales", "role": "member"}))
    monkeypatch.setenv("MEMLAKE_PROFILE", str(profile))
    assert "nothing visible" in run(capsys, "fact", "user:42", "plan", "--store", path)[1]
    assert "Enterprise Pro" in run(capsys, "fact", "user:42", "plan", "--store", path, "--scope", "acme/support")[1]


def test_fact_kind_reads_a_preference_slot(path, tmp_path, capsys):
    pref = {**PLAN, "kind": "preference", "subject": "u:2", "attribute": "lang", "value": "fr"}
    code, _, _ = run(capsys, "propose", json.dumps(pref), "--store", path, *AS_LEAD)
    src = tmp_path / "pref.jsonl"
    src.write_text(json.dumps(pref))
    run(capsys, "write", "--store", path, "--file", str(src), *AS_LEAD)
    assert "nothing visible" in run(capsys, "fact", "u:2", "lang", "--store", path, *AS_LEAD)[1]
    assert "'fr'" in run(capsys, "fact", "u:2", "lang", "--kind", "preference", "--store", path, *AS_LEAD)[1]


def test_propose_pending_approve_then_the_fact_is_served(path, capsys):
    record = {**PLAN, "subject": "user:9", "value": "Team", "scope": "acme/support"}  # for the team to read
    code, out, _ = run(capsys, "propose", json.dumps(record), "--store", path, *AS_BOT, "--json")
    assert code == 0
    proposal = json.loads(out)["record_id"]
    assert "nothing visible" in run(capsys, "fact", "user:9", "plan", "--store", path, *AS_LEAD)[1]
    code, out, _ = run(capsys, "pending", "--store", path, *AS_LEAD)
    assert code == 0 and proposal in out
    code, out, _ = run(capsys, "approve", proposal, "--store", path, *AS_LEAD)
    assert code == 0 and "approved" in out
    assert "Team" in run(capsys, "fact", "user:9", "plan", "--store", path, *AS_LEAD)[1]
    assert "no proposals pending" in run(capsys, "pending", "--store", path, *AS_LEAD)[1]


def test_an_agent_cannot_approve(path, capsys):
    _, out, _ = run(capsys, "propose", json.dumps(PLAN), "--store", path, *AS_BOT, "--json")
    code, _, err = run(capsys, "approve", json.loads(out)["record_id"], "--store", path, *AS_BOT)
    assert code == 2 and "PermissionDenied" in err


def test_retract_hides_the_record_and_history_keeps_it(path, capsys):
    _, out, _ = run(capsys, "fact", "user:42", "plan", "--store", path, *AS_LEAD, "--json")
    current = json.loads(out)["record_id"]
    code, out, _ = run(capsys, "retract", current, "--reason", "wrong plan", "--store", path, *AS_LEAD)
    assert code == 0 and "retracted" in out
    code, out, _ = run(capsys, "history", "user:42", "plan", "--store", path, *AS_LEAD, "--json")
    versions = json.loads(out)
    assert [v["value"] for v in versions] == ["Free Starter", "Enterprise Pro"]
    assert versions[-1]["retracted"] and versions[-1]["retraction_reason"] == "wrong plan"


def test_history_prints_both_intervals(path, capsys):
    code, out, _ = run(capsys, "history", "user:42", "plan", "--store", path, *AS_LEAD)
    assert code == 0 and out.count("\n") == 2 and "valid 2026-09-01" in out and "known" in out


def test_get_reads_a_record_by_id_and_a_sibling_gets_nothing(path, capsys):
    _, out, _ = run(capsys, "fact", "user:42", "plan", "--store", path, *AS_LEAD, "--json")
    rid = json.loads(out)["record_id"]
    code, out, _ = run(capsys, "get", rid, "--store", path, *AS_LEAD, "--json")
    assert code == 0 and json.loads(out)["value"] == "Enterprise Pro"
    code, out, _ = run(capsys, "get", rid, "--store", path, "--as", "bob", "--scope", "acme/sales")
    assert code == 0 and "nothing visible" in out


def test_list_shows_the_subjects_current_memories(path, capsys):
    code, out, _ = run(capsys, "list", "user:42", "--store", path, *AS_LEAD)
    assert code == 0 and "Enterprise Pro" in out and "Free Starter" not in out


def test_context_json_carries_items_with_provenance(path, capsys):
    code, out, _ = run(capsys, "context", "what plan is the user on", "--store", path, *AS_LEAD, "--json")
    payload = json.loads(out)
    assert code == 0 and "Enterprise Pro" in payload["text"]
    assert payload["items"][0]["source"] == "user_explicit" and payload["items"][0]["record_id"].startswith("fac_")


def test_schema_lists_each_kinds_fields_from_the_dataclasses(capsys):
    code, out, _ = run(capsys, "schema", "episode", "--json")
    fields = {f["name"]: f for f in json.loads(out)}
    assert code == 0 and fields["evidence"]["required"] and fields["outcome"]["required"]
    assert not fields["version_from"]["required"]
    code, out, _ = run(capsys, "schema", "preference")
    assert code == 0 and "ttl_seconds" in out and "15552000" in out


# the conversation kinds (turn, memory, summary, sighting) have enum and link fields this probe does not fill
@pytest.mark.parametrize("kind", ["fact", "preference", "episode", "reference", "policy", "note"])
def test_schema_required_fields_are_what_the_write_path_requires(kind, tmp_path):
    """Leaving out any field the schema calls required makes the write fail; the rest may go."""
    from datetime import datetime

    from memory_lakehouse.records import from_dict
    from memory_lakehouse.schema import kind_fields

    at = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    samples = {
        "datetime (ISO 8601 with offset)": at,
        "string": "x",
        "object": {"market": "US"},
        "any JSON value": "v",
        "integer": 1,
    }
    fields = kind_fields(kind)
    full = {"kind": kind, **{f["name"]: samples.get(f["type"], "x") for f in fields if f["required"]}}
    if kind == "episode":
        full["outcome"] = "fixed"
    store = ml.open(tmp_path / "s", embedder=ml.HashingEmbedder(dim=32))
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    store.write(from_dict(full), by=lead)
    for f in fields:
        if f["required"]:
            with pytest.raises((ml.ValidationError, TypeError)):
                store.write(from_dict({k: v for k, v in full.items() if k != f["name"]}), by=lead)
    store.close()


def test_replay_json_prints_a_row_per_decision(path, tmp_path, capsys):
    decisions = tmp_path / "d.jsonl"
    decisions.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"decision_id": "d1", "decided_at": "2026-09-05T00:00:00Z", "subject": "user:42", "query": "plan"},
                {"decision_id": "d2", "decided_at": "2026-01-01T00:00:00Z", "subject": "user:42", "query": "plan"},
            ]
        )
    )
    code, out, _ = run(capsys, "replay", "--file", str(decisions), "--store", path, *AS_LEAD, "--json")
    rows = json.loads(out)["per_decision"]
    assert code == 0 and [r["decision_id"] for r in rows] == ["d1", "d2"]
    assert all(r["leaked"] is False for r in rows)


def test_audit_takes_a_window_and_an_actor(path, capsys):
    code, out, _ = run(
        capsys, "audit", "--since", "2000-01-01T00:00:00Z", "--actor", "lead", "--store", path, *AS_DPO, "--json"
    )
    events = json.loads(out)
    assert code == 0 and [e["operation"] for e in events] == ["write"] and events[0]["actor"] == "lead"
