"""The LoCoMo eval follows the measurement protocol, scores as the protocol says, and never
tunes on the conversation it reports (a generated sample; the real dev data is not needed)."""

import sys
from datetime import timedelta
from pathlib import Path

import pytest

import memory_lakehouse as ml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evals/ is a top-level package of the repository

import locomo_sample  # noqa: E402  (tests/ is on the path, as for _support)

from evals import locomo  # noqa: E402

EMBEDDER = ml.HashingEmbedder(dim=64)


@pytest.fixture
def sample(tmp_path):
    return locomo_sample.write(tmp_path / "locomo", count=3)


def test_malformed_evidence_ids_are_read_the_way_they_were_meant_and_turnless_questions_left_out(sample):
    conv = locomo.read_conversation(sample[0])
    assert len(conv.turns) == 18 and len(conv.dates) == 3
    by_text = {q.text: q for q in conv.questions}
    assert by_text["Which two hobbies came up?"].evidence == ("D1:1", "D2:1")
    assert by_text["When did they discuss pottery?"].evidence == ("D1:1",)
    assert "Does this name a turn?" not in by_text and conv.unanswerable == 1


def test_each_turn_is_one_memory_naming_speaker_and_session_written_at_its_session_date(sample):
    conv = locomo.read_conversation(sample[0])
    clock = locomo.SimulatedClock(min(conv.dates.values()))
    store = ml.open(sample[0].parent / "store", clock=clock, embedder=EMBEDDER)
    ids = locomo.load_conversation(store, conv, clock)
    assert len(ids) == len(conv.turns) == len(set(ids.values()))
    # asked one day after the last session: every turn is visible then, none a day before the first
    assert clock() == max(conv.dates.values()) + timedelta(days=1)
    hits = store.recall("pottery", by=locomo.STEWARD, k=100)
    assert len(hits) == len(conv.turns)
    turn = {t.dia_id: t for t in conv.turns}
    dia_of = {rid: dia for dia, rid in ids.items()}
    for hit in hits:
        t = turn[dia_of[hit.record_id]]
        assert t.speaker in hit.text and f"session {t.session}" in hit.text and t.text in hit.text
        assert hit.record.known_since == conv.dates[t.session]  # the store's clock at the session's date
    before = min(conv.dates.values()) - timedelta(days=1)
    assert store.recall("pottery", by=locomo.STEWARD, k=5, as_of=before) == []


def test_sessions_rank_by_their_best_turn_and_ndcg_counts_each_relevant_session_once():
    q = locomo.Question("?", 4, ("D2:3", "D3:1"))
    o = locomo.score_question(q, ["D1:1", "D2:5", "D2:3", "D1:2", "D3:1"])
    assert o.turn_rank == 3 and not o.session_hit1
    # sessions in order: 1, 2, 3 -> relevant at ranks 2 and 3; ideal: ranks 1 and 2
    import math

    assert o.session_ndcg5 == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    hit = locomo.score_question(q, ["D3:7", "D1:1"])
    assert hit.session_hit1 and hit.turn_rank is None


def test_turn_recall_counts_categories_one_to_four_and_sessions_count_all_five():
    outcomes = [locomo.Outcome(4, 1, 1.0, True), locomo.Outcome(5, None, 1.0, True), locomo.Outcome(2, 7, 0.0, False)]
    s = locomo.summarise(outcomes)
    assert s["turn_r@1"] == 0.5 and s["turn_r@5"] == 0.5 and s["turn_r@10"] == 1.0
    assert s["session_hit@1"] == pytest.approx(0.667, abs=1e-3)
    assert "turn_r@5" not in s["by_category"]["adversarial"]


def test_leave_one_out_picks_each_fold_on_the_other_conversations_only():
    good, bad = locomo.Outcome(4, 1, 1.0, True), locomo.Outcome(4, None, 0.0, False)
    # setting "a" wins on conversations x and y, "b" on z: z's fold must pick "a" (chosen on x, y)
    per_conv = {"x": {"a": [good], "b": [bad]}, "y": {"a": [good], "b": [bad]}, "z": {"a": [bad], "b": [good]}}
    folds = {f["held_out"]: f for f in locomo.loo(per_conv)["folds"]}
    assert folds["z"]["picked"] == "a" and folds["z"]["session_hit@1"] == 0.0
    assert folds["x"]["picked"] == "a" and folds["x"]["session_hit@1"] == 1.0


def test_the_eval_runs_every_setting_on_every_conversation_through_the_public_api(sample):
    report = locomo.evaluate(sample[0].parent, embedder=EMBEDDER)
    assert set(report["results"]) == set(locomo.SETTINGS)
    assert set(report["conversations"]) == {"1", "2", "3"}
    for res in report["results"].values():
        assert len(res["folds"]) == 3
        pooled = res["pooled"]
        assert pooled["questions"] == sum(c["questions"] for c in report["conversations"].values())
        assert 0.0 <= pooled["session_hit@1"] <= 1.0
    # the topic words name one session each: BM25 finds it
    assert report["results"]["bm25"]["pooled"]["session_hit@1"] >= 0.5
    assert "| default |" in locomo.markdown(report)


def test_the_stores_own_loader_is_measured_the_same_way_and_its_hits_name_their_turns(sample):
    report = locomo.evaluate(sample[0].parent, embedder=EMBEDDER, loader="store")
    assert report["loader"] == "store"
    reference = locomo.evaluate(sample[0].parent, embedder=EMBEDDER)
    for name in locomo.SETTINGS:  # the same questions are scored either way
        assert report["results"][name]["pooled"]["questions"] == reference["results"][name]["pooled"]["questions"]
    assert report["results"]["bm25"]["pooled"]["session_hit@1"] >= 0.5


def test_the_naive_memory_is_asked_every_question_over_the_same_turns(sample, tmp_path):
    from evals import core, retrieval_suite

    ctx = core.Context(quick=False, embedder=EMBEDDER, workdir=tmp_path / "work")
    try:
        naive = retrieval_suite.naive_on_locomo(sample[0].parent, ctx)
    finally:
        ctx.close()
    report = locomo.evaluate(sample[0].parent, embedder=EMBEDDER)
    assert naive["questions"] == report["results"]["default"]["pooled"]["questions"]
    assert 0.0 <= naive["session_hit@1"] <= 1.0 and 0.0 <= naive["turn_r@5"] <= 1.0
    # the same vectors rank the same turns: naive equals the store's vector signal alone
    assert naive["turn_r@5"] == report["results"]["vector"]["pooled"]["turn_r@5"]
