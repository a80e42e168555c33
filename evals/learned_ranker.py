"""Would a small learned ranker over recall's own signals generalise across LoCoMo conversations?

Issue 12 names "learn a small ranker over a few features ... but only if it generalises
across conversations" as a lever; this fits it and measures it. Each question's pool is
recall's (the vector and BM25 lists' union at k = 50), and each of its turns gets the
product's signals from the product's functions (`ranking.learned_features`, the default
embedder, `lexical.Bm25`), so the baseline column is the default's score and the learned
one is what ``ml.Ranking(fusion="learned", weights=...)`` gives through `store.recall`
(tests check both turn by turn; docs/performance.md). Then:

* **turn model** — a pairwise logistic (RankNet-style) over the first eleven signals
  (`TURN_FEATURES`), trained on the evidence turns against the other turns among the
  baseline's best `TRAIN_DEPTH` of the pool;
* **session model** — the same over ten signals of a session (`SESSION_FEATURES`); a
  turn's score is its turn score plus ``lam`` times its session's score; both fold into
  one weight per `ranking.LEARNED_FEATURES` (`Model.weights`);
* everything is leave one conversation out, and ``lam`` is picked on the training
  conversations alone (nested: each of them held out in turn). ``--fit`` prints the
  weights fitted on every conversation (what `ranking.LEARNED_WEIGHTS` holds).

    python -m evals.learned_ranker ../shared/data/locomo-dev [--fit]

The data stays where it is: the study takes a path and copies nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evals import locomo
from memory_lakehouse import ranking
from memory_lakehouse.embed import Embedder, default_embedder
from memory_lakehouse.lexical import Bm25

TURN_FEATURES = ranking.LEARNED_FEATURES[:11]
#: The session model's signals, as columns of `ranking.LEARNED_FEATURES` (each the same for every
#: row of a session): best fused, context, best cosine, coverage, bm25, best fused of a named
#: speaker, log rows in the pool, best baseline, the mean of the best 3 fused (= context), month.
SESSION_COLUMNS = (4, 3, 11, 12, 13, 14, 15, 16, 3, 10)
SESSION_FEATURES = tuple(ranking.LEARNED_FEATURES[i] for i in SESSION_COLUMNS)
#: The turn model learns evidence against the other turns among the baseline's best this many of
#: the pool (None: the whole pool). 50: nested leave-one-out session Hit@1 / turn R@5 0.783 / 0.754,
#: against 0.782 / 0.753 at 100 and 0.779 / 0.754 over the whole pool (docs/performance.md).
TRAIN_DEPTH: int | None = 50
#: Session weights compared; each fold picks one on its training conversations.
LAMBDAS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Candidates:
    """One question's pool (recall's: the vector and BM25 lists' union), a row of
    `ranking.LEARNED_FEATURES` per turn of it, which turns are evidence, their ids."""

    conversation: str
    features: np.ndarray
    relevant: np.ndarray
    ids: list[str]
    question: locomo.Question


def turn_text(turn: locomo.Turn) -> str:
    """What the store embeds and indexes for a turn loaded as a `Reference` (title, full stop, content)."""
    return f"{turn.speaker} (session {turn.session}). {turn.text}"


def candidates(conv: locomo.Conversation, embedder: Embedder, *, k: int = locomo.DEPTH) -> list[Candidates]:
    """Every question of *conv* with recall's pool at *k* and the signals of each turn of it.

    The pool is what `store.recall(k=k)` fuses: the best ``max(4k, 20)`` turns by cosine and
    the best ``max(4k, ranking.CONTEXT_DEPTH)`` BM25 matches; each signal is computed by
    the product's functions (`ranking.learned_features`, `best_neighbours`, `names_speaker`,
    `in_named_month`, `with_context`'s formula), over the pool, as recall does.
    """
    texts = [turn_text(t) for t in conv.turns]
    vectors = embedder.embed(texts)
    norms = np.linalg.norm(vectors, axis=1)
    vectors = vectors / np.where(norms > 0, norms, 1.0)[:, None]
    bm25 = Bm25(texts)
    queries = embedder.embed([q.text for q in conv.questions])
    session = [t.session for t in conv.turns]
    depth = max(4 * k, 20)
    lex_depth = max(depth, ranking.CONTEXT_DEPTH)
    w = ranking.EPISODE_LEXICAL_WEIGHT
    c = ranking.CONTEXT_WEIGHT
    out = []
    for qi, q in enumerate(conv.questions):
        qv = queries[qi] / (float(np.linalg.norm(queries[qi])) or 1.0)
        cosine = vectors @ qv
        raw = bm25.scores(q.text)
        matched = np.flatnonzero(raw)
        lexical = matched[np.argsort(-raw[matched], kind="stable")][:lex_depth]
        pool = np.array(sorted(set(np.argsort(-cosine, kind="stable")[:depth].tolist()) | set(lexical.tolist())))
        in_bm25 = np.zeros(len(conv.turns), dtype=bool)
        in_bm25[lexical] = True
        cos, cov = cosine[pool], bm25.coverage(q.text)[pool]
        fused = np.array([ranking.fuse_scores(x, y, w) for x, y in zip(cos.tolist(), cov.tolist(), strict=True)])
        keys = [session[i] for i in pool]
        rids = [conv.turns[i].dia_id for i in pool]
        context = ranking.with_context(
            dict(zip(rids, fused.tolist(), strict=True)), dict(zip(rids, keys, strict=True)), weight=c
        )
        months = ranking.named_months(q.text)
        dated = np.array([ranking.in_named_month(conv.dates[s], months) for s in keys], dtype=bool)
        baseline = np.array([context[r] for r in rids]) + ranking.DATE_WEIGHT * dated
        features = ranking.learned_features(
            cosine=cos,
            coverage=cov,
            bm25=np.where(in_bm25[pool], raw[pool], 0.0),
            fused=fused,
            baseline=baseline,
            episode=keys,
            neighbour=ranking.best_neighbours(fused, keys, pool.tolist()),
            named=np.array([ranking.names_speaker(q.text, texts[i]) for i in pool]),
            dated=dated,
        )
        evidence = set(q.evidence)
        relevant = np.array([conv.turns[i].dia_id in evidence for i in pool])
        out.append(Candidates(conv.name, features, relevant, rids, q))
    return out


def pairwise_logistic(differences: Sequence[np.ndarray], *, l2: float = 1e-3, steps: int = 300) -> np.ndarray:
    """Weights *w* minimising the mean of ``log(1 + exp(-w·d))`` over the rows *d* (better minus worse)."""
    d = np.concatenate(differences)
    w = np.zeros(d.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(d @ w)))
        w -= 0.5 * (d.T @ (p - 1.0) / len(d) + l2 * w)
    return w


def _pairs(x: np.ndarray, better: np.ndarray) -> np.ndarray | None:
    if not 0 < better.sum() < len(better):
        return None
    return (x[better][:, None, :] - x[~better][None, :, :]).reshape(-1, x.shape[1])


def _session_of(dia_id: str) -> int:
    return int(dia_id[1:].split(":")[0])


def session_rows(c: Candidates) -> tuple[list[int], np.ndarray]:
    """The pool's sessions and a row of `SESSION_FEATURES` for each."""
    of = [_session_of(d) for d in c.ids]
    first = {s: i for i, s in reversed(list(enumerate(of)))}
    sessions = sorted(first)
    return sessions, c.features[[first[s] for s in sessions]][:, list(SESSION_COLUMNS)]


@dataclass(frozen=True)
class Model:
    """A turn model and a session model, each with the scaling of its training rows."""

    turn: tuple[np.ndarray, np.ndarray, np.ndarray]  # mean, std, weights
    session: tuple[np.ndarray, np.ndarray, np.ndarray]

    def weights(self, lam: float) -> tuple[float, ...]:
        """The turn model plus *lam* times the session model, as one weight per
        `ranking.LEARNED_FEATURES` (what ``ml.Ranking(fusion="learned", weights=...)`` takes)."""
        _, sd, w = self.turn
        _, ssd, sw = self.session
        out = np.zeros(len(ranking.LEARNED_FEATURES))
        out[: len(TURN_FEATURES)] += w / sd
        for j, col in enumerate(SESSION_COLUMNS):
            out[col] += lam * sw[j] / ssd[j]
        return tuple(float(round(v, 6)) for v in out)

    def scores(self, c: Candidates, lam: float) -> np.ndarray:
        return ranking.learned_scores(c.features, self.weights(lam), c.features[:, 8])


def _top(c: Candidates, depth: int | None) -> np.ndarray:
    """The rows of *c* among the baseline's best *depth* (every row when None)."""
    if depth is None:
        return np.arange(len(c.ids))
    return np.argsort(-c.features[:, 8], kind="stable")[:depth]


def train(pools: Sequence[Candidates], *, depth: int | None = TRAIN_DEPTH) -> Model:
    """The turn model on evidence against the other turns among the baseline's best *depth*
    of each pool; the session model on the pool's sessions."""
    x = np.concatenate([c.features[:, : len(TURN_FEATURES)] for c in pools])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    turn_w = pairwise_logistic(
        [
            p
            for c in pools
            for top in [_top(c, depth)]
            if (p := _pairs((c.features[top, : len(TURN_FEATURES)] - mu) / sd, c.relevant[top])) is not None
        ]
    )
    per_session = []
    for c in pools:
        sessions, rows = session_rows(c)
        relevant = {_session_of(e) for e in c.question.evidence}
        per_session.append((rows, np.array([s in relevant for s in sessions])))
    all_rows = np.concatenate([r for r, _ in per_session])
    smu, ssd = all_rows.mean(0), all_rows.std(0) + 1e-9
    session_w = pairwise_logistic([p for r, y in per_session if (p := _pairs((r - smu) / ssd, y)) is not None])
    return Model((mu, sd, turn_w), (smu, ssd, session_w))


def outcomes(pools: Sequence[Candidates], *, model: Model | None = None, lam: float = 0.0) -> list[locomo.Outcome]:
    """Each question scored on its pool ranked by *model* (or by the baseline when None)."""
    out = []
    for c in pools:
        s = c.features[:, 8] if model is None else model.scores(c, lam)
        ranked = [c.ids[i] for i in np.argsort(-s, kind="stable")][: locomo.DEPTH]
        out.append(locomo.score_question(c.question, ranked))
    return out


def pick_lambda(pools: Mapping[str, Sequence[Candidates]]) -> float:
    """The session weight with the best `locomo.objective`, each of *pools*' conversations held
    out of the training in turn (ties: the smaller)."""
    names = list(pools)
    inner: dict[float, list[locomo.Outcome]] = {lam: [] for lam in LAMBDAS}
    for val in names:
        model = train([c for n in names if n != val for c in pools[n]])
        for lam in LAMBDAS:
            inner[lam] += outcomes(pools[val], model=model, lam=lam)
    return max(LAMBDAS, key=lambda lam: (locomo.objective(inner[lam]), -lam))


def fit(pools: Mapping[str, Sequence[Candidates]]) -> tuple[float, tuple[float, ...]]:
    """λ picked leave one conversation out on *pools*, and the weights trained on all of them."""
    lam = pick_lambda(pools)
    return lam, train([c for p in pools.values() for c in p]).weights(lam)


def fold_weights(path: Path, embedder: Embedder | None = None) -> dict[str, tuple[float, ...]]:
    """Per conversation of *path*: the weights `fit` on the others (for a leave-one-out check
    through `store.recall`)."""
    pools = read_pools(path, embedder)
    return {held: fit({n: p for n, p in pools.items() if n != held})[1] for held in pools}


def read_pools(path: Path, embedder: Embedder | None = None) -> dict[str, list[Candidates]]:
    """Each conversation of *path*: its questions' pools (`candidates`)."""
    emb = embedder or default_embedder()
    return {conv.name: candidates(conv, emb) for conv in locomo.read_dir(path)}


def study(
    path: Path, embedder: Embedder | None = None, *, pools: Mapping[str, list[Candidates]] | None = None
) -> tuple[dict[str, dict[str, float]], list[dict[str, object]]]:
    """Baseline and learned rankers, leave one conversation out (the session weight picked nested):
    the pooled figures of each ranking, and each fold's pick and weights."""
    pools = pools if pools is not None else read_pools(path, embedder)
    names = list(pools)
    baseline: list[locomo.Outcome] = []
    fixed: dict[float, list[locomo.Outcome]] = {lam: [] for lam in LAMBDAS}
    nested: list[locomo.Outcome] = []
    folds: list[dict[str, object]] = []
    for held in names:
        pick = pick_lambda({n: pools[n] for n in names if n != held})
        model = train([c for n in names if n != held for c in pools[n]])
        for lam in LAMBDAS:
            fixed[lam] += outcomes(pools[held], model=model, lam=lam)
        mine = outcomes(pools[held], model=model, lam=pick)
        nested += mine
        baseline += outcomes(pools[held])
        s = locomo.summarise(mine)
        folds.append(
            {
                "held_out": held,
                "lambda": pick,
                "session_hit@1": s["session_hit@1"],
                "turn_r@5": s["turn_r@5"],
                "weights": model.weights(pick),
            }
        )
    measures = ("session_hit@1", "turn_r@5", "turn_r@1", "session_ndcg@5")

    def row(o: Sequence[locomo.Outcome]) -> dict[str, float]:
        s = locomo.summarise(o)
        return {m: s[m] for m in measures}

    rows = {
        "baseline (the default's formula)": row(baseline),
        "learned, session weight picked nested": row(nested),
        **{f"learned, session weight {lam} in every fold": row(o) for lam, o in fixed.items()},
    }
    return rows, folds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a folder of LoCoMo-format conversations (one JSON file each)")
    parser.add_argument(
        "--fit",
        action="store_true",
        help="also print the weights fitted on every conversation (ranking.LEARNED_WEIGHTS)",
    )
    args = parser.parse_args(argv)
    pools = read_pools(args.path)
    rows, folds = study(args.path, pools=pools)
    print("| ranking | session Hit@1 | turn R@5 | turn R@1 | session NDCG@5 |\n|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in r.values()) + " |")
    for f in folds:
        print(
            f"- held out {f['held_out']}: session weight {f['lambda']} -> Hit@1 {f['session_hit@1']} / R@5 {f['turn_r@5']}"
        )
    if args.fit:
        lam, weights = fit(pools)
        print(f"\nFitted on all {len(pools)} conversations, session weight {lam} (picked leaving each out):")
        print(f"LEARNED_WEIGHTS = {weights!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
