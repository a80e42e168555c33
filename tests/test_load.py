"""Loading LongMemEval and LoCoMo files: dates, replay, re-runs, bad input, roles, the CLI."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _support import AGENT, MEMBER, STEWARD, SimClock

import memory_lakehouse as ml
from memory_lakehouse.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data" / "conversations"
LOCOMO = SAMPLES / "locomo_sample.json"
LME = SAMPLES / "longmemeval_sample.json"
DEV = ROOT / ".." / "shared" / "data" / "locomo-dev"
READER = ml.Principal("reader", MEMBER.scope, role="member")


@pytest.fixture
def store(tmp_path) -> ml.MemoryStore:
    return ml.open(tmp_path / "store", clock=SimClock(), embedder=ml.HashingEmbedder())


def _turns(store: ml.MemoryStore) -> list[dict]:
    store.lake.refresh()
    return store.lake.known_rows("turn").to_pylist()


def test_the_samples_are_what_the_generator_makes(tmp_path):
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_conversation_samples.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for name in ("locomo_sample.json", "longmemeval_sample.json"):
        assert (tmp_path / name).read_text() == (SAMPLES / name).read_text(), name


def test_a_locomo_session_is_known_and_valid_from_its_own_date(store):
    report = store.load(LOCOMO, format="locomo", by=MEMBER)
    assert (report.sessions, report.turns, report.inserted) == (4, 24, 24)
    dates: dict[Any, Any] = {}
    for row in _turns(store):
        assert row["known_since"] == row["valid_from"]  # the commit's system time is the session's date
        dates.setdefault(row["session_id"], set()).add(row["valid_from"])
    assert all(len(d) == 1 for d in dates.values())
    assert len(set().union(*dates.values())) == 4


def test_as_of_on_a_loaded_benchmark_never_returns_a_turn_of_a_later_session(store):
    store.load(LOCOMO, format="locomo", by=MEMBER)
    assert store.load(LME, format="longmemeval", by=MEMBER).late_sessions == 0
    turns = _turns(store)
    starts = sorted({r["valid_from"] for r in turns})
    for before, after in zip(starts, [*starts[1:], starts[-1] + timedelta(days=1)], strict=True):
        at = before + (after - before) / 2
        hits = store.recall("what did you do with the dog and the marathon", by=READER, kinds=["turn"], k=50, as_of=at)
        assert hits, at
        assert all(h.record.said_at <= at for h in hits), at
        assert {h.record.said_at for h in hits} == {s for s in starts if s <= at}


def test_a_question_date_sees_only_the_sessions_before_it(store):
    report = store.load(LME, format="longmemeval", by=MEMBER)
    q = next(q for q in report.questions if q.question_id == "q_marathon")
    hits = store.recall(q.question, by=READER, kinds=["turn"], k=50, as_of=q.question_date)
    seen = {h.record.session_id for h in hits}
    assert seen and all(h.record.said_at <= q.question_date for h in hits)
    assert q.answer_session_ids[0] in seen
    assert len(seen) == 3  # the first three sessions happened before the question; two after


def test_rerunning_a_load_changes_nothing(store):
    first = store.load([LOCOMO], format="locomo", by=MEMBER)
    versions = {k: v.version for k, v in store.lake.views.items()}
    again = store.load([LOCOMO], format="locomo", by=MEMBER)
    store.lake.refresh()
    assert (again.inserted, again.duplicates) == (0, first.turns)
    assert {k: v.version for k, v in store.lake.views.items()} == versions


def test_questions_carry_dates_evidence_and_abstention(store):
    report = store.load(LOCOMO, format="locomo", by=MEMBER)
    qs = {q.question: q for q in report.questions}
    multi = qs["What did Ada start before adopting a dog?"]
    assert multi.evidence == (("locomo_sample-session-1", 2), ("locomo_sample-session-2", 2))  # "D1:3; D2:3"
    assert qs["What is Ben's favourite opera?"].abstention
    last = max(r["valid_from"] for r in _turns(store))
    assert multi.question_date == last + timedelta(days=1)
    lme = store.load(LME, format="longmemeval", by=MEMBER)
    assert [q.abstention for q in lme.questions] == [False, False, True]
    assert all(q.evidence for q in lme.questions if not q.abstention)


def test_turns_filter_by_session_speaker_and_role(store):
    store.load(LOCOMO, format="locomo", by=MEMBER)
    store.load(LME, format="longmemeval", by=MEMBER)
    ben = store.recall("how is it going", by=READER, kinds=["turn"], k=100, filters={"speaker": "Ben"})
    assert ben and {h.record.speaker for h in ben} == {"Ben"}
    one = store.recall("how", by=READER, kinds=["turn"], k=100, filters={"session_id": "locomo_sample-session-2"})
    assert len(one) == 6 and {h.record.position for h in one} == set(range(6))
    assistant = store.recall("great news", by=READER, kinds=["turn"], k=100, filters={"role": "assistant"})
    assert assistant and {h.record.role for h in assistant} == {"assistant"}


def test_a_photo_caption_is_part_of_the_turn_and_its_search_text(store):
    store.load(LOCOMO, format="locomo", by=MEMBER)
    hit = store.recall("beagle photo", by=READER, kinds=["turn"], k=1, signals=("bm25",))[0]
    assert "[shares a photo: a photo of a small beagle]" in hit.record.text
    assert hit.text.startswith("Ben (locomo_sample-session-3): ")


# ---------------------------------------------------------------------------- bad input


def _broken(tmp_path, mutate) -> Path:
    data = json.loads(LOCOMO.read_text())
    mutate(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "mutate, item, field",
    [
        (lambda d: d.update(session_2_date_time="sometime in spring"), "session_2", "session_2_date_time"),
        (lambda d: d["session_3"][1].update(text="   "), "session_3 turn D3:2", "text"),
        (lambda d: d["session_1"][0].pop("speaker"), "session_1 turn D1:1", "speaker"),
    ],
)
def test_bad_input_is_one_line_naming_file_item_and_field_and_writes_nothing(store, tmp_path, mutate, item, field):
    path = _broken(tmp_path, mutate)
    with pytest.raises(ml.ValidationError) as err:
        store.load(path, format="locomo", by=MEMBER)
    message = str(err.value)
    assert "\n" not in message and message.startswith("broken.json: ") and item in message and field in message
    assert _turns(store) == []


def test_a_malformed_file_names_the_file_and_the_line(store, tmp_path):
    path = tmp_path / "truncated.json"
    path.write_text(LME.read_text()[:500])
    with pytest.raises(ml.ValidationError, match=r"^truncated.json: line \d+: json: not JSON"):
        store.load(path, format="longmemeval", by=MEMBER)
    with pytest.raises(ml.ValidationError, match="a LongMemEval file is a JSON list"):
        store.load(LOCOMO, format="longmemeval", by=MEMBER)
    assert _turns(store) == []


def test_a_longmemeval_turn_without_content_is_refused(store, tmp_path):
    data = json.loads(LME.read_text())
    data[1]["haystack_sessions"][2][1]["content"] = ""
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ml.ValidationError, match=r"lme.json: question q_job session \S+ turn 1: content"):
        store.load(path, format="longmemeval", by=MEMBER)
    assert _turns(store) == []


def test_loading_without_the_right_role_is_refused(store):
    with pytest.raises(ml.PermissionDenied):
        store.load(LOCOMO, format="locomo", by=AGENT)  # agents propose; they do not write
    with pytest.raises(ml.PermissionDenied):
        store.load(LOCOMO, format="locomo", by=MEMBER, scope=ml.Scope("acme", "support"))
    assert _turns(store) == []
    assert store.load(LOCOMO, format="locomo", by=STEWARD).inserted == 24


# ---------------------------------------------------------------------------- the CLI


def test_memlake_load_loads_and_reports(tmp_path, capsys):
    args = ["--store", str(tmp_path / "s"), "--scope", "acme", "--json"]
    assert cli_main(["load", str(LOCOMO), "--format", "locomo", *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["sessions"], out["turns"], out["inserted"], out["questions"]) == (4, 24, 24, 6)
    assert cli_main(["load", str(LOCOMO), "--format", "locomo", *args]) == 0
    assert json.loads(capsys.readouterr().out)["duplicates"] == 24


def test_memlake_load_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    path = _broken(tmp_path, lambda d: d.update(session_1_date_time="32 Smarch"))
    assert cli_main(["load", str(path), "--format", "locomo", "--store", str(tmp_path / "s"), "--scope", "acme"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "broken.json: conversation broken session_1: session_1_date_time" in err


@pytest.mark.slow
@pytest.mark.skipif(not DEV.is_dir(), reason="the LoCoMo dev data (../shared/data) is not here")
def test_all_five_dev_conversations_load_from_the_cli(tmp_path, capsys):
    assert (
        cli_main(["load", str(DEV), "--format", "locomo", "--store", str(tmp_path / "s"), "--scope", "acme", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["sessions"], out["turns"], out["questions"], out["late_sessions"]) == (128, 2760, 999, 0)


def test_the_conversation_tables_keep_content_out_of_the_delta_log(store):
    store.load(LOCOMO, format="locomo", by=MEMBER)
    store.capture(
        "s1", [{"role": "user", "text": "I prefer window seats on long flights"}], by=MEMBER, subject="user:42"
    ).result()
    for kind in ("turn", "memory", "summary", "sighting"):
        config = store.lake.handle(kind).metadata().configuration
        assert config["delta.dataSkippingStatsColumns"] == "valid_from,valid_to,expires_at", kind
    logs = b"".join(
        p.read_bytes() for kind in ("turn", "memory") for p in (Path(store.root) / kind / "_delta_log").glob("*.json")
    )
    for text in (b"pottery class", b"window seats", b"Ada", b"locomo_sample-session"):
        assert text not in logs, text


def test_a_load_draws_no_bar_off_a_terminal_and_logs_its_sessions_when_asked(store, capsys, caplog):
    caplog.set_level(logging.INFO, logger="memory_lakehouse")
    store.load(LOCOMO, format="locomo", by=MEMBER)  # a small load: nothing shown
    store.load(LME, format="longmemeval", by=MEMBER, progress=True)  # stderr is not a terminal here: no bar
    assert capsys.readouterr() == ("", "")
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "loading longmemeval: 5 sessions"
    assert messages[-1].startswith("loading longmemeval: 5 of 5 sessions in ")
