"""The learned-ranker study (`evals.learned_ranker`): its baseline is the default recall's score,
its pairwise model learns what separates evidence from the rest, and every figure is leave one
conversation out."""

from __future__ import annotations

import tempfile

import locomo_sample
import numpy as np
import pytest

import memory_lakehouse as ml
from evals import learned_ranker, locomo
from memory_lakehouse import ranking


@pytest.fixture
def conversations(tmp_path):
    return locomo_sample.write(tmp_path, 4, sessions=3, turns=12)


def test_the_baseline_scores_each_turn_as_the_default_recall_does(conversations):
    conv = locomo.read_conversation(conversations[0])
    embedder = ml.HashingEmbedder(dim=384)
    pools = learned_ranker.candidates(conv, embedder)
    clock = locomo.SimulatedClock(min(conv.dates.values()))
    with tempfile.TemporaryDirectory() as root, ml.open(root, clock=clock, embedder=embedder) as store:
        locomo.load_conversation(store, conv, clock)
        for pool in pools:
            hits = store.recall(pool.question.text, by=locomo.STEWARD, k=10)
            ours = dict(zip(pool.ids, pool.features[:, 8].tolist(), strict=True))
            assert [round(ours[locomo.dia_id_of(h)], 4) for h in hits] == [round(h.score, 4) for h in hits]


def test_pairwise_training_weighs_the_signal_that_puts_the_better_rows_first():
    rng = np.random.default_rng(3)
    noise, signal = rng.normal(size=(400, 1)), rng.normal(size=(400, 1))
    better = (signal[:, 0] + 0.1 * rng.normal(size=400)) > 1.0
    rows = np.hstack([noise, signal])
    pairs = (rows[better][:, None, :] - rows[~better][None, :, :]).reshape(-1, 2)

    w = learned_ranker.pairwise_logistic([pairs])

    assert w[1] > 1.0 > abs(w[0]) * 5


def test_every_figure_holds_each_conversation_out_of_the_training_that_scores_it(conversations, monkeypatch):
    folder = conversations[0].parent
    names = [c.name for c in locomo.read_dir(folder)]
    trained_on: list[set[str]] = []
    real_train = learned_ranker.train

    def spy(pools):
        trained_on.append({p.conversation for p in pools})
        return real_train(pools)

    monkeypatch.setattr(learned_ranker, "train", spy)
    rows, folds = learned_ranker.study(folder, ml.HashingEmbedder(dim=384))

    assert [f["held_out"] for f in folds] == names
    assert all(f["lambda"] in learned_ranker.LAMBDAS for f in folds)
    n = len(names)
    for i, held in enumerate(names):  # per fold: a model per inner split (picks lambda), then the fold's
        calls = trained_on[i * n : (i + 1) * n]
        assert all(held not in used for used in calls)
        assert calls[-1] == set(names) - {held}
        assert sorted(len(used) for used in calls[:-1]) == [n - 2] * (n - 1)
    for figures in rows.values():
        assert set(figures) == {"session_hit@1", "turn_r@5", "turn_r@1", "session_ndcg@5"}
        assert all(0.0 <= v <= 1.0 for v in figures.values())


def test_the_study_and_recall_score_each_turn_the_same_under_learned_weights(conversations):
    conv = locomo.read_conversation(conversations[0])
    embedder = ml.HashingEmbedder(dim=384)
    pools = learned_ranker.candidates(conv, embedder)
    weights = tuple(np.random.default_rng(7).normal(size=len(ranking.LEARNED_FEATURES)).round(3).tolist())
    learned = ml.Ranking(fusion="learned", weights=weights)
    clock = locomo.SimulatedClock(min(conv.dates.values()))
    with tempfile.TemporaryDirectory() as root, ml.open(root, clock=clock, embedder=embedder) as store:
        locomo.load_conversation(store, conv, clock)
        for pool in pools:
            hits = store.recall(pool.question.text, by=locomo.STEWARD, k=10, ranking=learned)
            ours = ranking.learned_scores(pool.features, weights, pool.features[:, 8])
            by_id = dict(zip(pool.ids, ours.tolist(), strict=True))
            assert [round(by_id[locomo.dia_id_of(h)], 4) for h in hits] == [round(h.score, 4) for h in hits]
            assert [round(h.score, 4) for h in hits] == [round(v, 4) for v in sorted(ours, reverse=True)[:10]]


def test_the_folded_weights_score_as_the_turn_and_session_models_do(conversations):
    pools = learned_ranker.read_pools(conversations[0].parent, ml.HashingEmbedder(dim=384))
    model = learned_ranker.train([c for p in pools.values() for c in p])
    for c in next(iter(pools.values())):
        mu, sd, w = model.turn
        turn = ((c.features[:, : len(learned_ranker.TURN_FEATURES)] - mu) / sd) @ w
        sessions, rows = learned_ranker.session_rows(c)
        smu, ssd, sw = model.session
        by_session = dict(zip(sessions, ((rows - smu) / ssd) @ sw, strict=True))
        direct = turn + 2.0 * np.array([by_session[int(d[1:].split(":")[0])] for d in c.ids])
        folded = c.features @ np.array(model.weights(2.0))
        assert np.allclose(folded - folded.mean(), direct - direct.mean(), atol=1e-3)
