"""How recall orders what is visible: the `Ranking` settings and the functions they select.

Ranking never changes *what* recall may return (the visibility query decides that);
it orders the visible rows that the vector search and BM25 reached:

1. **fuse** — each row of the pool gets one score from its cosine and its lexical
   match (`Ranking.fusion`):

   * ``"convex"`` (the default) — ``(1 - w) * cosine01 + w * coverage``, both on their
     theoretical [0, 1] scale (`fuse_scores`): no per-query normalisation, so a query
     whose best lexical match covers a tenth of it cannot count that match as a perfect
     one;
   * ``"minmax"`` — cosine and BM25 each min-max normalised over the query's pool, then
     ``(1 - w) * cosine + w * bm25``;
   * ``"rrf"`` — weighted reciprocal-rank fusion of the two lists,
     ``(1 - w) / (60 + rank_vector) + w / (60 + rank_bm25)``;
   * ``"learned"`` — rows outside episodes as ``"convex"`` (with the date bonus); rows of
     episodes by a linear model over `LEARNED_FEATURES` (`learned_features`,
     `learned_scores`): the convex score with its context and date bonus is one of them,
     the others are what a turn's session, its neighbours and the question's names say.
     The weights (`Ranking.weights`, `LEARNED_WEIGHTS` by default) were fitted once by
     ``python -m evals.learned_ranker PATH --fit``. Opt-in: on the LoCoMo dev conversations
     it finds more evidence turns in the top 5 than ``"convex"`` but does not put the right
     session first more often (docs/performance.md);

2. **episodes** — memories recorded together form an *episode*: the rows of one session
   (``session_id``), or else of one kind, source and valid-from time, when the store
   holds at least `Ranking.episode_rows` of them (a conversation session's turns, not
   the handful of rows a sync wrote one day). An episode's rows are verbatim text,
   where a shared rare word is strong evidence: they fuse with
   `Ranking.episode_lexical_weight` instead of `Ranking.lexical_weight`;

3. **context** — an episode lends its rows evidence: a row's score becomes
   ``(s + c * e) / (1 + c)``, where ``e`` is the mean of the best `Ranking.context_top`
   scores of its episode in the pool and ``c`` is `Ranking.context_weight`
   (`with_context`). A question about one session is usually answered by a turn whose
   neighbours talk about the same thing. Rows outside episodes keep their score.

4. **named months** — a query that names a month ("in June", "on October 13, 2023")
   asks about what happened then: rows whose valid time begins in a month it names (and
   in a year it names, when it names one) gain `Ranking.date_weight` (`named_months`,
   `in_named_month`). The store knows each row's valid time; the words alone do not
   carry it (a turn says "yesterday", its session says when).

The weights were chosen leave-one-conversation-out on LoCoMo-format dev conversations
(``python -m evals.locomo``; docs/performance.md, "Recall on conversations"); rows
outside episodes rank as they did before, so the in-house fixture's figures hold.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as _replace
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ValidationError

#: The ranked lists recall can fuse; recall uses both unless told otherwise.
SIGNALS: tuple[str, ...] = ("vector", "bm25")
#: Ways of fusing the two signals (see the module docstring).
FUSIONS: tuple[str, ...] = ("convex", "minmax", "rrf", "learned")
#: Reciprocal-rank fusion constant (Cormack et al. 2009).
RRF_K = 60
#: Weight of the lexical signal in fusion for rows outside episodes: 0.1, chosen on the retrieval
#: fixture's dev half (docs/design-notes.md, "Hybrid fusion").
LEXICAL_WEIGHT = 0.1
#: Weight of a row's episode in its score (`with_context`); 2.0: every fold's pick (0-5 swept).
CONTEXT_WEIGHT = 2.0
#: How many of an episode's best scores make its evidence (mean); 3: best of 2, 3, 5, 8 on dev.
CONTEXT_TOP = 3
#: BM25 is read at least this deep when context is on, so an episode's turns reach the pool.
CONTEXT_DEPTH = 100
#: Lexical weight for rows of an episode (a conversation session's turns: verbatim text, where a
#: shared rare word is strong evidence). 0.3: every LOO fold's pick on the LoCoMo dev data.
EPISODE_LEXICAL_WEIGHT = 0.3
#: Added to the score of a row whose valid time begins in a month the query names: 0.1, on a
#: plateau from 0.05 to 0.2 on the LoCoMo dev data, each conversation held out (docs/performance.md).
DATE_WEIGHT = 0.1
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_WORD = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")  # capitalised: "may" is a verb
_YEAR_WORD = re.compile(r"\b(1[89]\d\d|2\d\d\d)\b")
#: Rows one episode must hold in the store to be read as one (a session's transcript): LoCoMo's
#: sessions hold 13-43 turns; the fixture's coincidental groups (CRM rows synced one day) at most 6.
EPISODE_ROWS = 10

#: The signals of a row of an episode that the ``"learned"`` fusion weighs, computed over recall's
#: pool (`learned_features`): "fused" is the convex score with the episode lexical weight,
#: "baseline" the default's whole score (fused, context, date bonus); "the episode's ..." are
#: over the episode's rows in the pool; a neighbour is the row written just before or after in
#: the same episode; a row's speaker is named when the query holds the first word of its text
#: (`names_speaker`).
LEARNED_FEATURES: tuple[str, ...] = (
    "cosine01",
    "coverage",
    "bm25 / the pool's best",
    "context (mean of the episode's best context_top fused)",
    "the episode's best fused",
    "the episode's mean fused",
    "the best neighbour's fused",
    "the speaker is named",
    "baseline",
    "fused",
    "valid from a month the query names",
    "the episode's best cosine01",
    "the episode's best coverage",
    "the episode's best bm25 / the pool's best",
    "the episode's best fused of a row whose speaker is named",
    "log(1 + the episode's rows in the pool)",
    "the episode's best baseline",
)
#: ``"learned"`` fusion's weights, one per `LEARNED_FEATURES`: a pairwise logistic over the turn
#: signals (the first 11; evidence turns against the others among the default's best 50 of the
#: pool) plus λ = 1.0 times one over the session signals, each divided by its training rows'
#: spread (`evals.learned_ranker.Model.weights`). Fitted 2026-12-02 on all five LoCoMo dev
#: conversations (26, 30, 41, 42, 43 of ../shared/data/locomo-dev, 997 questions), λ picked
#: leaving each out: `evals.learned_ranker.fit` (``python -m evals.learned_ranker PATH --fit``).
#: Fitted on the other four, they score each dev conversation as docs/performance.md reports.
LEARNED_WEIGHTS: tuple[float, ...] = (
    4.965441,
    1.115852,
    1.173602,
    5.002661,
    16.532871,
    4.050105,
    1.988075,
    1.032913,
    4.477613,
    5.416926,
    7.911172,
    5.61594,
    -0.364296,
    1.735317,
    1.07121,
    0.408035,
    6.233036,
)


@dataclass(frozen=True)
class Ranking:
    """Settings of recall's ranking stage; pass one to ``ml.open(ranking=...)`` or ``recall(ranking=...)``.

    *signals*: the ranked lists used (``("vector", "bm25")``; one alone ranks by that
    signal only, as a diagnosis: no fusion, no context). *fusion*: ``"convex"``,
    ``"minmax"``, ``"rrf"`` or ``"learned"``; *weights*: the learned fusion's, one per
    `LEARNED_FEATURES`. *lexical_weight*: the lexical signal's share in fusion,
    0 (vector order) to 1 (lexical order); *episode_lexical_weight*: the same for rows
    of an episode. *episode_rows*: how many rows a group recorded together must hold
    to be an episode. *context_weight*: how much an episode lends to its rows' scores
    (0: nothing); *context_top*: how many of its best scores count. *date_weight*: what a
    row whose valid time begins in a month the query names gains (0: nothing; fused
    rankings only).

    >>> Ranking().lexical_weight, Ranking(context_weight=0).context_weight
    (0.1, 0.0)
    >>> Ranking(fusion="cosine")
    Traceback (most recent call last):
    ...
    memory_lakehouse.errors.ValidationError: fusion must be one of ('convex', 'minmax', 'rrf', 'learned'), got 'cosine'
    """

    signals: tuple[str, ...] = SIGNALS
    fusion: str = "convex"
    lexical_weight: float = LEXICAL_WEIGHT
    episode_lexical_weight: float = EPISODE_LEXICAL_WEIGHT
    episode_rows: int = EPISODE_ROWS
    context_weight: float = CONTEXT_WEIGHT
    context_top: int = CONTEXT_TOP
    date_weight: float = DATE_WEIGHT
    weights: tuple[float, ...] = LEARNED_WEIGHTS

    def __post_init__(self) -> None:
        signals: Any = self.signals  # typed a tuple; callers may pass a bare str
        if isinstance(signals, str) or not signals or any(s not in SIGNALS for s in signals):
            raise ValidationError(f"signals must be a non-empty subset of {SIGNALS}, got {signals!r}", field="signals")
        object.__setattr__(self, "signals", tuple(dict.fromkeys(signals)))
        if self.fusion not in FUSIONS:
            raise ValidationError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}", field="fusion")
        for name in ("lexical_weight", "episode_lexical_weight", "context_weight", "date_weight"):
            value = getattr(self, name)
            unit = name in ("lexical_weight", "episode_lexical_weight", "date_weight")
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
                or (unit and value > 1)
            ):
                bound = "in [0, 1]" if unit else ">= 0"
                raise ValidationError(f"{name} must be a number {bound}, got {value!r}", field=name)
            object.__setattr__(self, name, float(value))
        for name in ("context_top", "episode_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name} must be a positive int, got {value!r}", field=name)
        weights: Any = self.weights
        n = len(LEARNED_FEATURES)
        if (
            isinstance(weights, (str, bytes, Mapping))
            or not isinstance(weights, Sequence)
            or len(weights) != n
            or any(isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) for w in weights)
        ):
            raise ValidationError(
                f"weights must be {n} finite numbers, one per ranking.LEARNED_FEATURES, got {weights!r}",
                field="weights",
            )
        object.__setattr__(self, "weights", tuple(float(w) for w in weights))

    def replace(self, **changes: Any) -> Ranking:
        """A copy with some settings changed (checked like a new one).

        >>> Ranking().replace(fusion="rrf").fusion
        'rrf'
        """
        return _replace(self, **changes)

    @property
    def fused(self) -> bool:
        return len(self.signals) > 1


def fuse_scores(cosine: float, coverage: float, alpha: float = LEXICAL_WEIGHT) -> float:
    """Convex combination of a cosine similarity and a lexical coverage, both mapped to [0, 1].

    Each signal is normalised by its *theoretical* range — cosine from [-1, 1], coverage
    already in [0, 1] — not by the best score of the query's list (Bruch et al. 2022,
    "An Analysis of Fusion Functions for Hybrid Retrieval").

    >>> fuse_scores(1.0, 1.0), fuse_scores(-1.0, 0.0), fuse_scores(0.0, 1.0, alpha=0.5)
    (1.0, 0.0, 0.75)
    """
    return (1.0 - alpha) * (cosine + 1.0) / 2.0 + alpha * coverage


def minmax(values: Mapping[str, float]) -> dict[str, float]:
    """Each value scaled to [0, 1] by the smallest and largest of *values* (all 0 when they are equal).

    >>> minmax({"a": 2.0, "b": 4.0, "c": 3.0})
    {'a': 0.0, 'b': 1.0, 'c': 0.5}
    """
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    span = hi - lo
    return {k: (v - lo) / span if span > 0 else 0.0 for k, v in values.items()}


def fuse(
    ranking: Ranking,
    ids: Sequence[str],
    cosine: Mapping[str, float],
    coverage: Mapping[str, float],
    bm25: Mapping[str, float],
    ranks: Mapping[str, Mapping[str, int]],
    in_episode: Mapping[str, bool] | None = None,
) -> dict[str, float]:
    """One score per row of the pool (*ids*), by `Ranking.fusion`.

    *cosine* and *coverage* hold every row of the pool; *bm25* and *ranks* (signal ->
    row -> 1-based rank) hold the rows each list reached; rows *in_episode* fuse with
    `Ranking.episode_lexical_weight`.
    """
    inside = in_episode or {}
    weight = {rid: ranking.episode_lexical_weight if inside.get(rid) else ranking.lexical_weight for rid in ids}
    if ranking.fusion in ("convex", "learned"):  # learned: rows of episodes are rescored after
        return {rid: fuse_scores(cosine[rid], coverage[rid], weight[rid]) for rid in ids}
    if ranking.fusion == "minmax":
        cos = minmax({rid: cosine[rid] for rid in ids})
        lex = minmax({rid: bm25.get(rid, 0.0) for rid in ids})
        return {rid: (1.0 - weight[rid]) * cos[rid] + weight[rid] * lex[rid] for rid in ids}
    vec, lexr = ranks.get("vector", {}), ranks.get("bm25", {})
    return {
        rid: (1.0 - weight[rid]) * (1.0 / (RRF_K + vec[rid]) if rid in vec else 0.0)
        + weight[rid] * (1.0 / (RRF_K + lexr[rid]) if rid in lexr else 0.0)
        for rid in ids
    }


def named_months(query: str) -> tuple[frozenset[int], frozenset[int]]:
    """The months (1-12) and the years *query* names, by their written names ("June", "2023").

    Month names count capitalised only: "may" is a verb far more often than a month.

    >>> named_months("When did Melanie go camping in June?")
    (frozenset({6}), frozenset())
    >>> named_months("What did Gina find on 1 February, 2023? It may help")
    (frozenset({2}), frozenset({2023}))
    """
    months = frozenset(MONTHS.index(m) + 1 for m in _MONTH_WORD.findall(query))
    years = frozenset(int(y) for y in _YEAR_WORD.findall(query)) if months else frozenset()
    return months, years


def in_named_month(valid_from: datetime | None, named: tuple[frozenset[int], frozenset[int]]) -> bool:
    """Whether a row valid from *valid_from* begins in a month *named* (`named_months`) names,
    and in a year it names when it names any.

    >>> from datetime import datetime
    >>> june = named_months("in June 2023")
    >>> in_named_month(datetime(2023, 6, 9), june), in_named_month(datetime(2022, 6, 9), june)
    (True, False)
    """
    months, years = named
    if valid_from is None or valid_from.month not in months:
        return False
    return not years or valid_from.year in years


def episode_keys(kind: str, rows: pa.Table) -> list[Hashable | None]:
    """Each row's episode key: its session, else (kind, source, valid-from time); None without either.

    *rows* holds ``source`` and ``valid_from`` (and ``session_id`` when the kind has one).
    """
    if "session_id" in rows.column_names:
        return [(kind, sid) if sid else None for sid in rows.column("session_id").to_pylist()]
    sources = rows.column("source").to_pylist()
    starts = rows.column("valid_from").cast(pa.int64()).to_pylist()
    return [(kind, src, t) if t is not None else None for src, t in zip(sources, starts, strict=True)]


@dataclass(frozen=True)
class EpisodeGroups:
    """The episodes of some rows that hold two rows or more (`episode_groups`)."""

    keys: list[Hashable]  # each group's key (`episode_keys`), in the order of `sizes`
    sizes: list[int]  # how many of the rows each group holds (two or more)
    of_row: np.ndarray  # int32, per row: its group's index in `keys`, -1 without a key or alone in it
    largest: int  # the size of the largest group, groups of one included (0 when no row has a key)

    def counts(self) -> dict[Hashable, int]:
        """Each group's key -> how many of the rows it holds."""
        return dict(zip(self.keys, self.sizes, strict=True))


def episode_groups(kind: str, rows: pa.Table) -> EpisodeGroups:
    """The episodes of *rows* that hold two rows or more, and which of them each row is in:
    ``Counter(episode_keys(kind, rows))`` without the None key and the groups of one, read
    as an org's BM25 build keeps it (each of its documents' episode: `Retriever._episodes`).

    Grouped by Arrow, and only groups of two or more become Python keys: an org of facts
    is mostly groups of one, whose tuples and `Counter` took ~22 ms of a 50,000-row org's
    build. tests/test_ranking.py checks both count alike, and that each row is in its key's group.

    *rows* holds what `episode_keys` reads.
    """
    of_row = np.full(rows.num_rows, -1, dtype=np.int32)
    at = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    if "session_id" in rows.column_names:
        names = ["session_id"]
        keyed = pa.table({"session_id": rows.column("session_id"), "_at": at})
        keyed = keyed.filter(pc.fill_null(pc.not_equal(keyed.column("session_id"), ""), False))
    else:
        names = ["source", "valid_from"]
        starts = rows.column("valid_from").cast(pa.int64())
        keyed = pa.table({"source": rows.column("source"), "valid_from": starts, "_at": at})
        keyed = keyed.filter(pc.is_valid(keyed.column("valid_from")))
    if not keyed.num_rows:
        return EpisodeGroups([], [], of_row, 0)
    grouped = keyed.group_by(names, use_threads=False).aggregate([("_at", "list")])
    members = grouped.column("_at_list").combine_chunks()
    counts = pc.list_value_length(members)
    largest = pc.max(counts).as_py()
    shared = grouped.filter(pc.greater(counts, 1))
    members = shared.column("_at_list").combine_chunks()
    of_row[pc.list_flatten(members).to_numpy()] = pc.list_parent_indices(members).to_numpy()
    keys: list[Hashable] = [(kind, *key) for key in zip(*(shared.column(c).to_pylist() for c in names), strict=True)]
    return EpisodeGroups(keys, pc.list_value_length(members).to_pylist(), of_row, largest)


def with_context(
    scores: Mapping[str, float], episode: Mapping[str, Hashable | None], *, weight: float, top: int = CONTEXT_TOP
) -> dict[str, float]:
    """``(s + weight * e) / (1 + weight)``: *e* is the mean of the best *top* scores of the row's episode.

    Rows whose episode is None, or alone in theirs, keep their score (their episode's
    evidence is their own). The result stays on the scores' scale, and a row's rank
    within its episode never changes.

    >>> s = with_context({"a": 0.9, "b": 0.8, "c": 0.85}, {"a": None, "b": "s1", "c": "s2"}, weight=1.0)
    >>> sorted(s, key=s.get, reverse=True)  # nothing shared: the order is the scores'
    ['a', 'c', 'b']
    >>> s = with_context({"a": 0.9, "b": 0.8, "c": 0.7}, {"a": None, "b": "s1", "c": "s1"}, weight=4.0, top=1)
    >>> round(s["b"], 2), round(s["c"], 2)  # c gets its episode's best, 0.8: (0.7 + 4 * 0.8) / 5
    (0.8, 0.78)
    """
    if weight <= 0:
        return dict(scores)
    members: dict[Hashable, list[float]] = {}
    for rid, s in scores.items():
        key = episode.get(rid)
        if key is not None:
            members.setdefault(key, []).append(s)
    evidence = {key: sum(sorted(v, reverse=True)[:top]) / min(top, len(v)) for key, v in members.items()}
    out = {}
    for rid, s in scores.items():
        key = episode.get(rid)
        e = evidence[key] if key is not None else s
        out[rid] = (s + weight * e) / (1.0 + weight)
    return out


def names_speaker(query: str, text: str) -> bool:
    """Whether *query* holds, as a word, the first word of *text*: a turn's speaker, who opens
    its text in both LoCoMo loaders ("Melanie (session 3): ...").

    >>> names_speaker("When did Melanie paint a sunrise?", "Melanie (session 1). I painted it")
    True
    >>> names_speaker("When did Melanie paint?", "Caroline (session 1). Melanie did")
    False
    """
    first = _WORD.match(text)
    return first is not None and first.group(0).lower() in _words(query)


_WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=64)
def _words(query: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(query))


def best_neighbours(fused: np.ndarray, episode: Sequence[Hashable | None], position: Sequence[int]) -> np.ndarray:
    """Each row's best neighbour: the larger *fused* of the rows at *position* ± 1 in its episode
    (0 when neither is among the rows, or the row has no episode).

    >>> best_neighbours(np.array([0.5, 0.9, 0.2, 0.7]), ["a", "a", "a", "b"], [1, 2, 3, 4]).tolist()
    [0.9, 0.5, 0.9, 0.0]
    """
    at = {(e, p): float(f) for e, p, f in zip(episode, position, fused.tolist(), strict=True) if e is not None}
    return np.array(
        [
            max(at.get((e, p - 1), 0.0), at.get((e, p + 1), 0.0)) if e is not None else 0.0
            for e, p in zip(episode, position, strict=True)
        ]
    )


def learned_features(
    *,
    cosine: np.ndarray,
    coverage: np.ndarray,
    bm25: np.ndarray,
    fused: np.ndarray,
    baseline: np.ndarray,
    episode: Sequence[Hashable | None],
    neighbour: np.ndarray,
    named: np.ndarray,
    dated: np.ndarray,
    top: int = CONTEXT_TOP,
) -> np.ndarray:
    """One row of `LEARNED_FEATURES` per row of the pool, from each row's signals.

    *cosine* is the raw cosine (-1..1); *bm25* the BM25 score (0 where BM25 did not reach
    the row); *fused* the convex score; *baseline* the default's whole score; *episode*
    each row's episode key (rows without one are their own); *neighbour* `best_neighbours`;
    *named* `names_speaker`; *dated* `in_named_month`.
    """
    n = len(fused)
    cos01 = (np.asarray(cosine, float) + 1.0) / 2.0
    best_bm25 = float(np.max(bm25)) if n else 0.0
    bm = np.asarray(bm25, float) / best_bm25 if best_bm25 > 0 else np.zeros(n)
    named_fused = np.asarray(named, float) * fused
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(episode):
        groups.setdefault(key if key is not None else ("row", i), []).append(i)
    per_episode = np.zeros((n, 9))
    for rows in groups.values():
        idx = np.array(rows)
        f = np.sort(fused[idx])[::-1]
        per_episode[idx] = [
            f[:top].mean(),
            f[0],
            f.mean(),
            cos01[idx].max(),
            coverage[idx].max(),
            bm[idx].max(),
            named_fused[idx].max(),
            math.log1p(len(idx)),
            baseline[idx].max(),
        ]
    own = np.stack([cos01, coverage, bm], 1)
    return np.hstack(
        [
            own,
            per_episode[:, :3],
            np.stack([neighbour, np.asarray(named, float), baseline, fused, np.asarray(dated, float)], 1),
            per_episode[:, 3:],
        ]
    )


def learned_scores(features: np.ndarray, weights: Sequence[float], baseline: np.ndarray) -> np.ndarray:
    """The model's scores (``features @ weights``), placed on the baseline's scale: the same mean
    and spread as *baseline* over these rows, so rows outside episodes, which keep the
    default's score, still rank among them. One row, or rows the model cannot tell apart,
    keep the baseline.
    """
    raw: np.ndarray = features @ np.asarray(weights, float)
    spread = float(raw.std())
    if len(raw) < 2 or spread <= 1e-12:
        return np.array(baseline, dtype=float)
    scale = float(baseline.std()) / spread if float(baseline.std()) > 0 else 1.0
    return float(baseline.mean()) + (raw - float(raw.mean())) * scale
