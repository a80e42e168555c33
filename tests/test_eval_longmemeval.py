"""The LongMemEval-format eval loads each question's haystack with the store's own loader,
scores as the benchmark does, and its generated sample is in the benchmark's layout."""

import json
import sys
from pathlib import Path

import memory_lakehouse as ml
from memory_lakehouse.capture import loaders

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evals/ is a top-level package of the repository

from evals import core, longmemeval, retrieval_suite  # noqa: E402

EMBEDDER = ml.HashingEmbedder(dim=64)
SEED = 4242  # not a suite seed (tests/test_evals_suite.py checks the suite's are not used in tests)


def instance(question: str, answer_turn: str, *, qid: str = "q1") -> dict:
    """A three-session haystack with one answer turn in the second session."""
    sessions = [
        [{"role": "user", "content": "My laptop has been slow."}, {"role": "assistant", "content": "Restart it."}],
        [
            {"role": "user", "content": "I went hiking on Sunday."},
            {"role": "user", "content": answer_turn, "has_answer": True},
        ],
        [{"role": "user", "content": "Any tips for basil?"}, {"role": "assistant", "content": "Water it often."}],
    ]
    return {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": question,
        "answer": "Porto",
        "question_date": "2023/05/20 (Sat) 10:00",
        "haystack_session_ids": ["a", "b", "c"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/08 (Mon) 09:00", "2023/05/15 (Mon) 09:00"],
        "haystack_sessions": sessions,
        "answer_session_ids": ["b"],
    }


def test_the_generated_sample_is_longmemeval_layout_with_every_question_type_and_marked_answers(tmp_path):
    sample = longmemeval.generate(SEED, 60)
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(sample), encoding="utf-8")
    sessions, questions = loaders.parse_longmemeval(path)  # the store's own parser reads it
    assert len(questions) == 60 and len(sessions) == 60 * 24
    assert {q.category for q in questions} == set(longmemeval.QUESTION_TYPES)
    for q in questions:  # the has_answer turns are exactly in the answer sessions
        assert q.evidence and {sid for sid, _ in q.evidence} == set(q.answer_session_ids)
        assert q.question_date is not None
        assert all(s.date < q.question_date for s in sessions if s.session_id.startswith(q.question_id + "-"))
    assert longmemeval.generate(SEED, 60) == sample  # a seed gives one sample


def test_sessions_rank_by_their_best_turn_and_recall_all_needs_every_answer_session():
    q = loaders.Question("q", "?", "a", None, "multi-session", (("s2", 1), ("s7", 0)), ("s2", "s7"))
    six_sessions = [(f"s{n}", 0) for n in (1, 3, 4, 5, 6)] + [("s2", 1), ("s7", 0)]
    missed = longmemeval.score_question(q, six_sessions)
    assert missed.turn_rank == 6 and not missed.session_recall_all5 and not missed.session_hit1
    found = longmemeval.score_question(q, [("s2", 0), ("s2", 1), ("s7", 0)])
    assert found.turn_rank == 2 and found.session_recall_all5 and found.session_hit1
    assert found.session_ndcg5 == 1.0


def test_every_ranking_and_the_naive_memory_score_each_question_and_shared_words_put_bm25s_answer_first():
    words = instance("Where did my sister Maya relocate to?", "My sister Maya relocated to Porto.")
    other = instance("What is my dog's name?", "My dog is called Biscuit.", qid="q2")
    other["haystack_session_ids"] = ["x", "y", "z"]
    other["answer_session_ids"] = ["y"]
    report = longmemeval.evaluate([words, other], embedder=EMBEDDER, naive=lambda: core.NaiveMemory(EMBEDDER))
    assert set(report["results"]) == {*longmemeval.SETTINGS, "naive"}
    assert report["questions"] == 2
    bm25 = report["results"]["bm25"]
    assert bm25["turn_r@1"] == 1.0 and bm25["session_hit@1"] == 1.0  # shared words put the answer first
    for res in report["results"].values():  # three sessions each: every answer session is in the top five
        assert res["session_recall_all@5"] == 1.0 and res["questions"] == 2


def test_abstention_questions_are_left_out_of_retrieval():
    abs_q = instance("Where does my aunt live?", "My sister Maya relocated to Porto.", qid="q9_abs")
    report = longmemeval.evaluate([abs_q], embedder=EMBEDDER)
    assert report["questions"] == 0 and report["abstention_questions_left_out"] == 1


def test_the_suite_reports_the_longmemeval_format_sample_beside_the_naive_memory(tmp_path):
    ctx = core.Context(quick=True, embedder=EMBEDDER, workdir=tmp_path / "work", sizes={"retrieval.lme": 6})
    try:
        result = retrieval_suite.run(ctx)
    finally:
        ctx.close()
    lme = {m.name: m for m in result.metrics if m.name.startswith("LongMemEval-format")}
    assert set(lme) == {
        f"LongMemEval-format {measure} — {setting}"
        for measure in ("session recall_all@5", "turn R@5")
        for setting in longmemeval.SETTINGS
    }
    default = lme["LongMemEval-format session recall_all@5 — default"]
    assert default.naive is not None and "seed 150010, 6 questions" in default.data
    assert result.details["longmemeval_format"]["results"]["default"]["questions"] == 6
