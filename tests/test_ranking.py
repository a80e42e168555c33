"""Ranking: the lexical tokenizer, lexical coverage, the fusion function and hybrid recall's use of them.

Stores here use `HashingEmbedder` (no model load): these tests pin down properties of
the ranking, not its quality on real queries (that is ``python -m evals.retrieval``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _support import MEMBER, STEWARD, SUPPORT, SimClock, day, fact
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse import lexical, retrieve
from memory_lakehouse.lexical import Bm25, lexical_coverage, lexical_scores, tokenize
from memory_lakehouse.ranking import episode_groups, episode_keys, fuse_scores

EMBEDDER = ml.HashingEmbedder(dim=64)

CORPUS = [
    "customer:globex plan: Enterprise Pro, up to 500 members",
    "customer:initech billing_cycle: annual, invoiced each February",
    "customer:initech contact_channel: email only",
    "payments-api prod: refunds stuck in pending; tried re-queued the refund batch -> fixed",
    "order:NW-88213 delivery_status: delivered on 11 Feb",
    "order:NW-90114 delivery_status: delayed at the Memphis hub",
]


# ----------------------------------------------------------------------- tokenizer


def test_an_inflected_form_matches_its_stem():
    scores = lexical_scores("how are Initech's invoices sent", CORPUS)
    assert int(np.argmax(scores)) == 1 and scores[1] > 0  # "invoices" ~ "invoiced"
    assert lexical_scores("refunding", CORPUS)[3] > 0  # "refunding" ~ "refunds", "refund"


def test_identifier_parts_are_words():
    assert tokenize(["contact_channel", "order:NW-88213"]) == [["contact", "channel"], ["order", "nw", "88213"]]
    scores = lexical_scores("which channel do they want to be contacted on", CORPUS)
    assert int(np.argmax(scores)) == 2


def test_a_query_of_stopwords_matches_nothing():
    assert tokenize(["what should I do about it when they can't?"]) == [[]]
    assert not lexical_scores("what should I do about it", CORPUS).any()


@given(st.lists(st.text(alphabet=st.sampled_from("abcdeéß_-: '.IİΣσ\x000123456789THE\n"), max_size=40), max_size=6))
def test_tokenize_gives_what_bm25s_tokenize_gives(texts):
    assert tokenize(texts) == _bm25s_tokens(texts)


def test_tokenize_gives_what_bm25s_tokenize_gives_on_prose():
    texts = [
        *CORPUS,
        "The customers' INVOICES were re-sent; they're invoiced monthly.",
        "",
        "Ünïcödé wörds and naïve cafés",
        "The ODYSSEUS sailed; ΟΔΥΣΣΕΥΣ.",
        "a row\x00break, and ΣΑΣ\x00ΣΑΣ",
    ]
    assert tokenize(texts) == _bm25s_tokens(texts)


def _bm25s_tokens(texts: list[str]) -> list[list[str]]:
    """What bm25s's own tokenizer gives with the settings `lexical.tokenize` spells out."""
    import bm25s

    from memory_lakehouse.lexical import STOPWORDS, TOKEN_PATTERN, _stemmer

    tokens: list[list[str]] = bm25s.tokenize(
        list(texts),
        stopwords=STOPWORDS,
        stemmer=_stemmer(),
        token_pattern=TOKEN_PATTERN,
        return_ids=False,
        show_progress=False,
    )
    return tokens


def _tokens_per_text(texts: list[str]) -> list[list[str]]:
    """`lexical.term_ids` of *texts* read back as `tokenize`'s lists."""
    terms = lexical.term_ids(texts)
    stem_of = {i: stem for stem, i in terms.vocab.items()}
    out: list[list[str]] = [[] for _ in texts]
    for token, row in zip(terms.tokens.tolist(), terms.rows.tolist(), strict=True):
        out[row].append(stem_of[token])
    assert terms.lengths.tolist() == [len(doc) for doc in out]
    return out


@given(st.lists(st.text(alphabet=st.sampled_from("abcdeéß_-: '.IİΣσ\x000123456789THE\n"), max_size=40), max_size=8))
def test_the_term_ids_of_many_texts_are_their_tokens(texts):
    assert _tokens_per_text(texts) == tokenize(texts)


def test_the_term_ids_of_prose_are_its_tokens_with_or_without_a_row_break_in_a_text():
    texts = CORPUS + NEW_ROWS + ["", "The ODYSSEUS sailed; ΟΔΥΣΣΕΥΣ.", "the the the", "Invoices: C-20417 sso_provider"]
    assert _tokens_per_text(texts) == tokenize(texts)
    assert _tokens_per_text(texts + ["a row\x00break"]) == tokenize(texts + ["a row\x00break"])


@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "", "s1", "s2"]),
            st.sampled_from([None, "chat", "billing_api"]),
            st.sampled_from([None, 0, 60, 3600]),
        ),
        max_size=30,
    )
)
def test_episode_groups_count_what_the_episode_keys_name_and_place_each_row_in_its_keys_group(rows):
    from collections import Counter

    import pyarrow as pa

    stamp = pa.timestamp("us", tz="UTC")
    starts = pa.array([None if t is None else t * 1_000_000 for _, _, t in rows], pa.int64()).cast(stamp)
    sessions = pa.table({"session_id": pa.array([sid for sid, _, _ in rows], pa.string())})
    dated = pa.table({"source": pa.array([src for _, src, _ in rows], pa.string()), "valid_from": starts})
    for kind, table in (("turn", sessions), ("fact", dated)):
        keys = episode_keys(kind, table)
        counted = Counter(key for key in keys if key is not None)
        groups = episode_groups(kind, table)
        assert groups.counts() == {key: n for key, n in counted.items() if n > 1}
        assert groups.largest == max(counted.values(), default=0)
        placed = [groups.keys[g] if g >= 0 else None for g in groups.of_row.tolist()]
        assert placed == [key if key is not None and counted[key] > 1 else None for key in keys]


def _bm25s_built(texts: list[str]) -> Bm25:
    """A `Bm25` whose matrix bm25s built itself (`bm25s.BM25.index`), the reference `lexical.index` follows."""
    import bm25s

    model = Bm25([])
    model.size = len(texts)
    corpus = tokenize(texts)
    model.average_length = sum(map(len, corpus)) / len(corpus)
    model.model = bm25s.BM25()
    model.model.index(corpus, show_progress=False)
    return model


def _same_scoring(ours: Bm25, theirs: Bm25, queries: list[str]) -> None:
    assert ours.model is not None and theirs.model is not None
    assert set(ours.model.vocab_dict) == set(theirs.model.vocab_dict)
    for word in theirs.model.vocab_dict:
        assert ours._document_frequency(word) == theirs._document_frequency(word), word
    for query in queries:
        assert ours.scores(query).tobytes() == theirs.scores(query).tobytes(), query  # to the bit
        assert ours.coverage(query).tobytes() == theirs.coverage(query).tobytes(), query


def test_the_term_matrix_built_with_numpy_scores_as_bm25s_builds_it():
    rows = CORPUS + NEW_ROWS + ["", "the", "refund refund refund refunds refunded", "order " * 30 + "late"]
    queries = ["initech invoices", "refund stuck", "order late", "NW-88213 delivered", "zeppelin", "the"]
    queries += [" ".join(tokenize([text])[0][:3]) for text in rows if text]
    _same_scoring(Bm25(rows), _bm25s_built(rows), queries)


@given(
    st.lists(
        st.lists(st.sampled_from(["plan", "plans", "team", "seat", "billing", "refund", "sso", "the", "x1", "42"])).map(
            " ".join
        ),
        min_size=1,
        max_size=12,
    ).filter(lambda texts: any(tokenize(texts))),
    st.lists(st.sampled_from(["plan", "team", "seats", "billing refund", "sso 42", "unknown"]), min_size=1, max_size=3),
)
def test_the_term_matrix_built_with_numpy_scores_as_bm25s_builds_it_for_any_corpus(texts, words):
    _same_scoring(Bm25(texts), _bm25s_built(texts), [" ".join(words)])


def test_a_model_with_settings_the_numpy_build_does_not_spell_out_is_refused():
    import bm25s

    terms = lexical.term_ids(CORPUS)
    with pytest.raises(ValueError, match="Lucene"):
        lexical._term_matrix(bm25s.BM25(method="atire"), terms)
    lexical._term_matrix(bm25s.BM25(), terms)  # bm25s's defaults: what `Bm25` makes


# ----------------------------------------------------------------------- lexical coverage


@given(
    st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.0, 2.5, 3.0]), max_size=400).flatmap(
        lambda values: st.tuples(st.just(values), st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    ),
    st.integers(0, 450),
)
def test_the_best_rows_of_a_bm25_list_are_the_allowed_nonzero_ones_sorted_stably(values_and_allowed, depth):
    """`best_of` sorts only the rows that can make the list; ties at its cut (many here) fall as in a full sort."""
    values, allowed = values_and_allowed
    scores, mask = np.array(values, dtype=np.float32), np.array(allowed, dtype=bool)
    matched = np.flatnonzero((scores != 0) & mask)
    want = matched[np.argsort(-scores[matched], kind="stable")][:depth]
    assert lexical.best_of(scores, mask, depth).tolist() == want.tolist()


def test_coverage_is_the_share_of_the_query_s_idf_a_row_matches():
    bm25 = Bm25(CORPUS)
    assert lexical_coverage("NW-88213 delivered", CORPUS[4], bm25) == pytest.approx(1.0)
    assert lexical_coverage("NW-88213 delivered", CORPUS[0], bm25) == 0.0
    # the rare id weighs more than the word two rows share
    only_id = lexical_coverage("88213 delivery", "88213", bm25)
    only_common = lexical_coverage("88213 delivery", "delivery", bm25)
    assert only_id > 0.5 > only_common > 0 and only_id + only_common == pytest.approx(1.0)


def test_a_word_half_the_rows_hold_adds_no_coverage():
    rows = [f"customer:c{i} plan: tier {i}" for i in range(6)] + ["service:billing owner: payments team"]
    bm25 = Bm25(rows)
    assert lexical_coverage("customer payments", rows[0], bm25) == 0.0  # "customer" is in 6 of 7 rows
    assert lexical_coverage("customer payments", rows[6], bm25) == pytest.approx(1.0)


def test_query_words_no_row_holds_lower_coverage():
    bm25 = Bm25(CORPUS)
    known = lexical_coverage("globex plan", CORPUS[0], bm25)
    diluted = lexical_coverage("globex plan zeppelin", CORPUS[0], bm25)
    assert known == pytest.approx(1.0) and 0 < diluted < known


def test_the_sparse_coverage_of_the_model_agrees_with_coverage_row_by_row():
    bm25 = Bm25(CORPUS)
    for query in ("initech invoices", "delivered order NW-88213 late", "refund stuck zeppelin", "the"):
        fast = bm25.coverage(query)
        slow = [lexical_coverage(query, text, bm25) for text in CORPUS]
        assert fast == pytest.approx(slow, abs=1e-6), query
        assert ((fast >= 0) & (fast <= 1 + 1e-6)).all()


@given(
    texts=st.lists(st.sampled_from(CORPUS + ["plan plan order", "zeppelin", ""]), min_size=1, max_size=12),
    query=st.sampled_from(["initech invoices", "delivered order NW-88213 late", "plan zeppelin", "the", "globex plan"]),
    picks=st.lists(st.integers(0, 11), max_size=15),
)
@settings(max_examples=200, deadline=None)
def test_coverage_of_a_few_rows_is_those_rows_of_the_whole_coverage(texts, query, picks):
    """`Bm25.coverage_at` (recall's pool) gives the rows of `Bm25.coverage`, in the order asked,
    repeats and rows no query word reaches included."""
    bm25 = Bm25(texts)
    rows = np.array([p % len(texts) for p in picks], dtype=np.int64)
    assert bm25.coverage_at(query, rows).tolist() == bm25.coverage(query)[rows].tolist()


def test_coverage_of_new_rows_uses_the_org_model_s_idf():
    org = Bm25(CORPUS)
    new = Bm25(["customer:initech plan: Team, 25 members"])
    assert new.coverage("initech members", idf_from=org)[0] == pytest.approx(
        lexical_coverage("initech members", "customer:initech plan: Team, 25 members", org)
    )


QUERIES = [
    "how are Initech's invoices sent",
    "refund refunds refunding",
    "NW-88213 delivered",
    "which customers have Enterprise members",
    "okta single sign-on",  # words no row holds
    "what about it",  # stopwords only
]
NEW_ROWS = [
    "customer:initech plan: Team, 25 members",
    "customer:hooli sso_provider: okta single sign-on via saml",
    "order:NW-1 delivery_status: delivered delivered on 2 Mar",
    "",
]


@pytest.mark.parametrize("query", QUERIES)
def test_a_row_of_the_model_is_scored_by_scores_of_as_by_the_model(query):
    org = Bm25(CORPUS)
    assert org.scores_of(query, CORPUS) == pytest.approx(org.scores(query), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("query", QUERIES)
def test_coverage_of_new_rows_is_what_a_model_of_them_gives_with_the_org_s_idf(query):
    org = Bm25(CORPUS)
    assert org.coverage_of(query, NEW_ROWS).tolist() == Bm25(NEW_ROWS).coverage(query, idf_from=org).tolist()


def test_a_new_row_s_word_the_model_never_saw_scores_as_the_rarest():
    org = Bm25(CORPUS)
    okta, initech = org.scores_of("okta initech", ["customer:hooli sso_provider: okta", "customer:initech sso: none"])
    assert okta > initech > 0  # "okta": document frequency 0; "initech": in two of six rows


# ----------------------------------------------------------------------- fusion function

unit = st.floats(0.0, 1.0)
cosine = st.floats(-1.0, 1.0)


@given(cosine, cosine, unit, unit, st.floats(0.0, 1.0))
def test_fusion_is_bounded_and_monotone_in_each_signal(c1, c2, v1, v2, alpha):
    s = fuse_scores(c1, v1, alpha)
    assert -1e-12 <= s <= 1 + 1e-12
    if c1 <= c2 and v1 <= v2:
        assert fuse_scores(c1, v1, alpha) <= fuse_scores(c2, v2, alpha) + 1e-12


@given(cosine, cosine, unit, unit)
def test_fusion_weight_zero_is_the_cosine_order_and_one_the_coverage_order(c1, c2, v1, v2):
    if c2 - c1 > 1e-9:
        assert fuse_scores(c1, v1, 0.0) < fuse_scores(c2, v2, 0.0)
    if v2 - v1 > 1e-9:
        assert fuse_scores(c1, v1, 1.0) < fuse_scores(c2, v2, 1.0)


def test_fusion_normalises_by_theoretical_ranges_not_by_the_other_hits():
    # a pair's order never depends on which other rows are in the pool (no per-query max)
    a, b = fuse_scores(0.40, 0.10), fuse_scores(0.35, 0.60)
    assert (a < b) == (fuse_scores(0.40, 0.10) < fuse_scores(0.35, 0.60))
    alpha = retrieve.FUSION_ALPHA
    assert 0 < alpha < 0.5  # coverage refines the cosine order; it never outweighs it
    # full coverage moves a row up by at most alpha of the fused scale
    assert fuse_scores(0.3, 1.0) - fuse_scores(0.3, 0.0) == pytest.approx(alpha)


# ----------------------------------------------------------------------- hybrid recall


@pytest.fixture
def hstore(tmp_path):
    store = ml.open(tmp_path / "store", clock=SimClock(day(30)), embedder=EMBEDDER)
    # one valid time each: a batch of rows from one source at one valid time would be an episode
    records = [
        fact(f"customer:c{i}", "plan", f"plan {i} allows {10 * i} seats on the {word} tier", day(1 + i), scope=SUPPORT)
        for i, word in enumerate(["bronze", "silver", "gold", "platinum", "diamond", "zinc"] * 4)
    ]
    store.write_many(records, by=STEWARD)
    return store


def test_hybrid_hits_carry_both_signals_and_a_fused_score_in_order(hstore):
    hits = hstore.recall("gold tier seats", by=MEMBER, k=8)
    assert len(hits) == 8
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    top = hits[0]
    assert "gold" in top.text
    reasons = "; ".join(top.why)
    assert "vector #" in reasons and "bm25 #" in reasons and "lexical coverage" in reasons
    cos = float(reasons.split("cosine ")[1].split(",")[0])
    cov = float(reasons.split("lexical coverage ")[1].split(";")[0])
    assert top.score == pytest.approx(fuse_scores(cos, cov), abs=2e-3)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_the_fusion_weight_spans_vector_only_to_coverage_only(hstore, alpha):
    query = "platinum plan seats"
    hybrid = hstore.recall(query, by=MEMBER, k=5, ranking=ml.Ranking(lexical_weight=alpha))
    if alpha == 0.0:  # the same cosines in the same order (rows of equal cosine may swap)
        vector = hstore.recall(query, by=MEMBER, k=5, signals=("vector",))
        assert [cosine_of(h) for h in hybrid] == pytest.approx([cosine_of(h) for h in vector], abs=1e-3)
    else:
        covs = [float("; ".join(h.why).split("lexical coverage ")[1].split(";")[0]) for h in hybrid]
        assert covs == sorted(covs, reverse=True) and "platinum" in hybrid[0].text


def cosine_of(hit: ml.Hit) -> float:
    reasons = "; ".join(hit.why)
    if "cosine " in reasons:
        return float(reasons.split("cosine ")[1].split(",")[0])
    return float(reasons.split("vector #")[1].split("(")[1].split(")")[0])


def test_a_row_only_bm25_reaches_is_scored_with_its_exact_cosine(hstore, monkeypatch):
    # a vector list of depth 1 leaves the lexical match out of it: fusion must still score it
    real = hstore.retriever._vector_list
    monkeypatch.setattr(
        hstore.retriever,
        "_vector_list",
        lambda org, query, allowed, candidates, depth: real(org, query, allowed, candidates, 1),
    )
    hits = hstore.recall("diamond", by=MEMBER, k=3)
    diamond = [h for h in hits if "diamond" in h.text]
    assert diamond and all("cosine " in "; ".join(h.why) for h in hits)
    reasons = "; ".join(diamond[0].why)
    qvec = EMBEDDER.embed(["diamond"])[0]
    dvec = EMBEDDER.embed([diamond[0].text])[0]
    expected = float(np.dot(qvec, dvec) / (np.linalg.norm(qvec) * np.linalg.norm(dvec)))
    assert float(reasons.split("cosine ")[1].split(",")[0]) == pytest.approx(expected, abs=2e-3)


def test_a_fresh_write_is_fused_with_the_org_model_s_idf(hstore):
    assert hstore.recall("gold", by=MEMBER, k=1)  # builds the org's BM25 model
    new = hstore.write(
        fact("customer:zed", "sso_provider", "okta single sign-on via saml", day(2), scope=SUPPORT), by=STEWARD
    )
    lines: list[str] = []
    with hstore.tracer(lines.append):
        hits = hstore.recall("okta sso", by=MEMBER, k=3)
    assert hits[0].record_id == new.record_id
    reasons = "; ".join(hits[0].why)
    assert "bm25-new #1" in reasons and "lexical coverage 1.00" in reasons
    assert any(line.startswith("fused ") for line in lines)


def test_single_signals_keep_their_own_order(hstore):
    for signals in (("vector",), ("bm25",)):
        hits = hstore.recall("silver seats", by=MEMBER, k=6, signals=signals)
        assert all("lexical coverage" not in "; ".join(h.why) for h in hits)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert not math.isnan(sum(scores))
