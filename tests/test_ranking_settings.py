"""`ml.Ranking`: the settings of recall's ranking stage, episodes and their context, and the
index build saying so when it is long. What is visible never depends on the ranking."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from _support import MEMBER, STEWARD, SUPPORT, SimClock, day, fact, fact_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse.ranking import LEARNED_FEATURES, fuse_scores, with_context

EMBEDDER = ml.HashingEmbedder(dim=64)


def reference(i: int, text: str, when, source: str = "chat") -> ml.Reference:
    return ml.Reference(
        uri=f"chat:{source}:{i}", title=f"turn {i}", content=text, published_at=when, source=source, scope=SUPPORT
    )


@pytest.mark.parametrize(
    "bad",
    [
        dict(fusion="max"),
        dict(lexical_weight=1.5),
        dict(lexical_weight=-0.1),
        dict(context_weight=float("nan")),
        dict(context_top=0),
        dict(signals=()),
        dict(signals="bm25"),
        dict(signals=("bm25", "colbert")),
        dict(episode_rows=0),
        dict(date_weight=1.5),
        dict(date_weight=-0.1),
    ],
)
def test_a_ranking_setting_out_of_range_is_a_validation_error(bad):
    with pytest.raises(ml.ValidationError):
        ml.Ranking(**bad)


@pytest.mark.parametrize(
    "weights",
    [
        (1.0,) * (len(LEARNED_FEATURES) - 1),
        (1.0,) * (len(LEARNED_FEATURES) + 1),
        (float("nan"),) + (1.0,) * (len(LEARNED_FEATURES) - 1),
        (float("inf"),) * len(LEARNED_FEATURES),
        (True,) * len(LEARNED_FEATURES),
        ("1",) * len(LEARNED_FEATURES),
        "1" * len(LEARNED_FEATURES),
        dict.fromkeys(LEARNED_FEATURES, 1.0),
        None,
    ],
)
def test_learned_weights_that_are_not_one_finite_number_per_feature_are_a_validation_error(weights):
    with pytest.raises(ml.ValidationError, match=rf"weights must be {len(LEARNED_FEATURES)} finite numbers"):
        ml.Ranking(fusion="learned", weights=weights)


def test_learned_weights_are_kept_as_a_tuple_of_floats():
    r = ml.Ranking(fusion="learned", weights=[1] * len(LEARNED_FEATURES))  # type: ignore[arg-type]  # a list is accepted
    assert r.weights == (1.0,) * len(LEARNED_FEATURES) and hash(r) == hash(r.replace())


# ----------------------------------------------------------------------- context, as a function

scores = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 1), min_size=1)
groups = st.sampled_from([None, "s1", "s2"])


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a pure function: timing is the machine's
@given(scores, st.data(), st.floats(0.1, 5), st.integers(1, 4))
def test_context_never_reorders_rows_within_one_episode_and_leaves_loners_alone(s, data, weight, top):
    episode = {rid: data.draw(groups) for rid in s}
    out = with_context(s, episode, weight=weight, top=top)
    for a in s:
        if episode[a] is None:
            assert out[a] == pytest.approx(s[a])
        for b in s:
            if episode[a] is not None and episode[a] == episode[b] and s[a] < s[b]:
                assert out[a] <= out[b] + 1e-12
    assert all(min(s.values()) - 1e-12 <= v <= max(s.values()) + 1e-12 for v in out.values())


def test_an_episode_lifts_a_turn_whose_neighbours_share_the_question_topic():
    s = {"kiln-1": 0.60, "kiln-2": 0.58, "kiln-3": 0.57, "lone": 0.61, "other-1": 0.40, "other-2": 0.39}
    episode = {"kiln-1": "s1", "kiln-2": "s1", "kiln-3": "s1", "lone": "s2", "other-1": "s2", "other-2": "s2"}
    out = with_context(s, episode, weight=2.0, top=3)
    assert max(out, key=out.__getitem__) == "kiln-1"  # "lone" scored higher alone, but its session is off topic


# ----------------------------------------------------------------------- in recall


@pytest.fixture
def chat_store(tmp_path):
    """Two sessions of 12 turns (episodes) and 6 rows of one sync (not an episode)."""
    store = ml.open(tmp_path / "store", clock=SimClock(day(30)), embedder=EMBEDDER)
    pottery = [reference(i, f"we fired the clay pots in the kiln, batch {i}", day(3)) for i in range(11)]
    pottery.append(reference(11, "the glaze on the vase cracked", day(3)))
    running = [reference(100 + i, f"ran ten miles in new running shoes, week {i}", day(5)) for i in range(11)]
    running.append(reference(111, "the glaze of ice on the track", day(5)))
    sync = [
        fact(f"customer:c{i}", "note", f"customer {i} asked about glaze colours", day(7), scope=SUPPORT)
        for i in range(6)
    ]
    store.write_many([*pottery, *running, *sync], by=STEWARD)
    return store


def test_rows_of_a_large_batch_from_one_source_at_one_time_are_an_episode_and_small_batches_are_not(chat_store):
    hits = chat_store.recall("the glaze cracked on the vase from the kiln", by=MEMBER, k=30)
    by_text = {h.text: h for h in hits}
    vase = by_text["turn 11. the glaze on the vase cracked"]
    assert any("episode" in w for w in vase.why)
    synced = [h for h in hits if h.kind == "fact"]
    assert synced and not any("episode" in "; ".join(h.why) for h in synced)
    for h in synced:  # outside episodes: the fused score is the plain convex one
        reasons = "; ".join(h.why)
        cos = float(reasons.split("cosine ")[1].split(",")[0])
        cov = float(reasons.split("lexical coverage ")[1].split(";")[0])
        assert h.score == pytest.approx(fuse_scores(cos, cov, ml.Ranking().lexical_weight), abs=2e-3)


def test_the_session_about_the_question_lifts_its_turn_over_a_like_match_in_another_session(chat_store):
    # "glaze" is in one turn of each session; only the pottery session talks about the kiln
    query = "glaze kiln"

    def margin(ranking: ml.Ranking) -> float:
        hits = {h.text: h.score for h in chat_store.recall(query, by=MEMBER, k=40, ranking=ranking)}
        return hits["turn 11. the glaze on the vase cracked"] - hits["turn 111. the glaze of ice on the track"]

    assert margin(ml.Ranking()) > margin(ml.Ranking(context_weight=0)) + 0.01
    top = chat_store.recall(query, by=MEMBER, k=40)
    texts = [h.text for h in top]
    assert texts.index("turn 11. the glaze on the vase cracked") < texts.index(
        "turn 111. the glaze of ice on the track"
    )


def test_the_store_ranking_is_set_on_open_and_a_recall_may_pass_its_own(tmp_path):
    lexical = ml.Ranking(signals=("bm25",))
    store = ml.open(tmp_path / "s", clock=SimClock(day(30)), embedder=EMBEDDER, ranking=lexical)
    store.write_many(
        [
            fact(f"customer:c{i}", "plan", f"plan {word}", day(1 + i), scope=SUPPORT)
            for i, word in enumerate(["gold", "silver", "zinc"])
        ],
        by=STEWARD,
    )
    only_bm25 = store.recall("gold plan", by=MEMBER, k=3)
    assert all("vector #" not in "; ".join(h.why) for h in only_bm25)
    fused = store.recall("gold plan", by=MEMBER, k=3, ranking=ml.Ranking())
    assert any("vector #" in "; ".join(h.why) for h in fused)
    vector = store.recall("gold plan", by=MEMBER, k=3, signals=("vector",))  # signals= overrides the ranking's
    assert all("bm25 #" not in "; ".join(h.why) for h in vector)
    with pytest.raises(ml.ValidationError):
        store.recall("gold plan", by=MEMBER, ranking={"fusion": "rrf"})  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(ml.ValidationError):
        ml.open(tmp_path / "t", embedder=EMBEDDER, ranking="bm25")  # type: ignore[arg-type]  # the wrong type is the point


@pytest.mark.parametrize(
    "ranking",
    [
        ml.Ranking(),
        ml.Ranking(fusion="minmax"),
        ml.Ranking(fusion="rrf"),
        ml.Ranking(context_weight=0),
        ml.Ranking(lexical_weight=1.0),
        ml.Ranking(fusion="learned"),
    ],
)
def test_no_ranking_brings_back_a_superseded_value(tmp_path, ranking):
    store = ml.open(tmp_path / "s", clock=SimClock(day(30)), embedder=EMBEDDER)
    store.write(fact("customer:c1", "plan", "plan gold with 50 seats", day(1), scope=SUPPORT), by=STEWARD)
    store.write(fact("customer:c1", "plan", "plan silver with 10 seats", day(2), scope=SUPPORT), by=STEWARD)
    hits = store.recall("gold plan 50 seats", by=MEMBER, k=5, ranking=ranking)
    assert [fact_of(h.record).value for h in hits] == ["plan silver with 10 seats"]


# ----------------------------------------------------------------------- a month the query names


def two_trips(tmp_path, **open_kw):
    """Two notes of the same words, one valid from June 2023, one from March 2023."""
    store = ml.open(tmp_path / "trips", clock=SimClock(day(400)), embedder=EMBEDDER, **open_kw)
    for i, when in enumerate((datetime(2023, 3, 11, tzinfo=UTC), datetime(2023, 6, 17, tzinfo=UTC))):
        note = ml.Reference(
            uri=f"chat:trip:{i}",
            title="trip",
            content="we went camping by the lake",
            published_at=when,
            source="chat",
            scope=SUPPORT,
        )
        store.write(note, by=STEWARD)
    return store


def test_a_query_naming_a_month_ranks_the_rows_valid_from_that_month_first(tmp_path):
    store = two_trips(tmp_path)

    hits = store.recall("When did we go camping in June?", by=MEMBER, k=2)

    assert [h.record.published_at.month for h in hits] == [6, 3]
    assert hits[0].score - hits[1].score == pytest.approx(ml.Ranking().date_weight, abs=1e-6)
    assert any("a month the query names" in why for why in hits[0].why)
    unnamed = store.recall("When did we go camping?", by=MEMBER, k=2)
    assert unnamed[0].score == pytest.approx(unnamed[1].score, abs=1e-6)  # no month named: no bonus


@pytest.mark.parametrize(
    ("query", "ranking"),
    [
        ("When did we go camping in June 2022?", ml.Ranking()),  # the year named is not the row's
        ("When did we go camping in june?", ml.Ranking()),  # lower case: read as a word, not a month
        ("When did we go camping in June?", ml.Ranking(date_weight=0)),
        ("When did we go camping in June?", ml.Ranking(signals=("vector",))),  # one signal: no fusion stage
    ],
)
def test_no_bonus_without_a_month_and_year_the_row_matches_or_with_the_weight_off(tmp_path, query, ranking):
    store = two_trips(tmp_path)

    hits = store.recall(query, by=MEMBER, k=2, ranking=ranking)

    if ranking.fused:  # one signal alone scores by rank: its two scores differ anyway
        assert hits[0].score == pytest.approx(hits[1].score, abs=1e-6)
    assert not any("a month the query names" in why for h in hits for why in h.why)


def test_naming_the_month_of_a_superseded_value_does_not_bring_it_back(tmp_path):
    store = ml.open(tmp_path / "s", clock=SimClock(day(400)), embedder=EMBEDDER)
    store.write(fact("customer:c1", "plan", "plan gold", datetime(2023, 6, 2, tzinfo=UTC), scope=SUPPORT), by=STEWARD)
    store.write(fact("customer:c1", "plan", "plan silver", datetime(2023, 9, 2, tzinfo=UTC), scope=SUPPORT), by=STEWARD)

    hits = store.recall("which plan in June 2023?", by=MEMBER, k=5)

    assert [fact_of(h.record).value for h in hits] == ["plan silver"]


# ----------------------------------------------------------------------- a long index build says so


def test_a_long_index_build_logs_its_progress_and_a_short_one_stays_quiet(tmp_path, caplog):
    store = ml.open(tmp_path / "s", clock=SimClock(day(30)), embedder=EMBEDDER)
    store.write_many(
        [fact(f"customer:c{i}", "plan", f"plan {i}", day(1), scope=SUPPORT) for i in range(300)], by=STEWARD
    )
    with caplog.at_level(logging.INFO, logger="memory_lakehouse"):
        store.recall("plan 7", by=MEMBER, k=3)
    lines = [r.getMessage() for r in caplog.records if r.name == "memory_lakehouse"]
    assert any(line.startswith("indexing acme") and "300 rows" in line for line in lines)
    assert any("300 of 300 rows" in line for line in lines)
    caplog.clear()
    store.write(fact("customer:new", "plan", "plan new", day(2), scope=SUPPORT), by=STEWARD)
    with caplog.at_level(logging.INFO, logger="memory_lakehouse"):
        store.recall("plan new", by=MEMBER, k=3)
    assert not [r for r in caplog.records if r.name == "memory_lakehouse"]


def test_a_background_index_is_built_after_writes_and_recall_finds_every_row(tmp_path):
    store = ml.open(tmp_path / "s", clock=SimClock(day(30)), embedder=EMBEDDER, index="background")
    store.write_many(
        [fact(f"customer:c{i}", "plan", f"plan {i}", day(1), scope=SUPPORT) for i in range(300)], by=STEWARD
    )
    store.retriever.wait_for_warm_up()
    part = store.retriever.index.partition("acme")
    assert part is not None and len(part) == 300  # built and saved before any recall
    store.write(fact("customer:late", "plan", "plan late", day(2), scope=SUPPORT), by=STEWARD)
    hits = store.recall("plan late", by=MEMBER, k=3)  # read-your-writes, whether or not the thread got there
    assert hits[0].record.subject_name == "customer:late"
    store.close()
    with pytest.raises(ml.ValidationError):
        ml.open(tmp_path / "t", embedder=EMBEDDER, index="eager")


# ----------------------------------------------------------------------- learned fusion in recall


def learned(seed: int) -> ml.Ranking:
    import numpy as np

    return ml.Ranking(fusion="learned", weights=np.random.default_rng(seed).normal(size=len(LEARNED_FEATURES)).tolist())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_learned_fusion_changes_the_order_of_what_is_visible_never_what_is_visible(chat_store, seed):
    hidden = reference(900, "the glaze cracked in the kiln again", day(3), source="other-team")
    hidden = ml.Reference(**{**hidden.__dict__, "scope": ml.Scope("acme", "support", "tier1")})
    chat_store.write(hidden, by=STEWARD)
    query = "the glaze cracked on the vase from the kiln"
    default = chat_store.recall(query, by=MEMBER, k=100)
    mine = chat_store.recall(query, by=MEMBER, k=100, ranking=learned(seed))
    assert {h.record_id for h in mine} == {h.record_id for h in default}
    assert "the glaze cracked in the kiln again" not in {h.text.split(". ", 1)[-1] for h in mine}
    top = chat_store.recall(query, by=MEMBER, k=5, ranking=learned(seed))
    assert len(top) == 5 and {h.record_id for h in top} <= {h.record_id for h in default}
    assert [h.record_id for h in mine] != [h.record_id for h in default]  # it does reorder


def test_learned_fusion_leaves_the_score_of_rows_outside_episodes_as_the_default_gives_it(chat_store):
    query = "the glaze cracked on the vase from the kiln"
    default = {h.record_id: h.score for h in chat_store.recall(query, by=MEMBER, k=100) if h.kind == "fact"}
    mine = {
        h.record_id: h.score for h in chat_store.recall(query, by=MEMBER, k=100, ranking=learned(0)) if h.kind == "fact"
    }
    assert default and mine == pytest.approx(default)
