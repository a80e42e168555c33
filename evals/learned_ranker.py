"""Would a small learned ranker over recall's own signals generalise across LoCoMo conversations?

A study, not the product's ranking: issue 12 names "learn a small ranker over a few
features ... but only if it generalises across conversations" as a lever, and this
measures it before anything ships. Every turn of a conversation is scored against each
question with the store's own pieces (the default embedder, `lexical.Bm25`'s coverage
and BM25, the fusion and context constants of `ranking`), so the baseline column
reproduces the default's figures through `store.recall` (docs/performance.md). Then:

* **turn model** — a pairwise logistic (RankNet-style) over ten signals of a turn
  (`TURN_FEATURES`), trained on the evidence turns against the other turns of the
  baseline's top `POOL` for each question;
* **session model** — the same over nine signals of a session (`SESSION_FEATURES`); a
  turn's score is its turn score plus ``lam`` times its session's score;
* everything is leave one conversation out, and ``lam`` is picked on the training
  conversations alone (nested: each of them held out in turn).

    python -m evals.learned_ranker ../shared/data/locomo-dev

The data stays where it is: the study takes a path and copies nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evals import locomo
from memory_lakehouse import ranking
from memory_lakehouse.embed import Embedder, default_embedder
from memory_lakehouse.lexical import Bm25

#: Candidates per question: the baseline's best this many turns (its recall reads 4·k deep).
POOL = 100
TURN_FEATURES = (
    "cosine",
    "coverage",
    "bm25 / the query's best",
    "context (mean of the session's best 3)",
    "the session's best turn",
    "the session's mean",
    "the best neighbour (turn before or after)",
    "the speaker is named in the question",
    "baseline score",
    "fused score",
    "the question names the session's month (`ranking.in_named_month`)",
)
SESSION_FEATURES = (
    "best turn",
    "best context",
    "best cosine",
    "best coverage",
    "best bm25",
    "best fused of a turn by a named speaker",
    "log turns in the pool",
    "best baseline",
    "mean of the best 3 fused",
    "the question names the session's month",
)
#: Session weights compared; each fold picks one on its training conversations.
LAMBDAS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Candidates:
    """One question's pool: a row of `TURN_FEATURES` per turn, which turns are evidence, their ids."""

    conversation: str
    features: np.ndarray
    relevant: np.ndarray
    ids: list[str]
    question: locomo.Question


def turn_text(turn: locomo.Turn) -> str:
    """What the store embeds and indexes for a turn loaded as a `Reference` (title, full stop, content)."""
    return f"{turn.speaker} (session {turn.session}). {turn.text}"


def candidates(conv: locomo.Conversation, embedder: Embedder) -> list[Candidates]:
    """Every question of *conv* with its pool and the turn signals of each candidate."""
    texts = [turn_text(t) for t in conv.turns]
    vectors = embedder.embed(texts)
    bm25 = Bm25(texts)
    queries = embedder.embed([q.text for q in conv.questions])
    session = np.array([t.session for t in conv.turns])
    speakers = sorted({t.speaker for t in conv.turns})
    speaker_of = np.array([speakers.index(t.speaker) for t in conv.turns])
    same_as_prev = np.r_[False, session[1:] == session[:-1]]
    same_as_next = np.r_[session[:-1] == session[1:], False]
    w = ranking.EPISODE_LEXICAL_WEIGHT
    out = []
    for qi, q in enumerate(conv.questions):
        cosine = (vectors @ queries[qi] + 1.0) / 2.0
        coverage = bm25.coverage(q.text)
        raw = bm25.scores(q.text)
        bm = raw / raw.max() if raw.max() > 0 else raw
        fused = (1.0 - w) * cosine + w * coverage
        context, best, mean = (np.zeros_like(fused) for _ in range(3))
        for s in np.unique(session):
            rows = session == s
            top = np.sort(fused[rows])[::-1]
            context[rows], best[rows], mean[rows] = top[: ranking.CONTEXT_TOP].mean(), top[0], top.mean()
        neighbour = np.maximum(
            np.where(same_as_prev, np.r_[0.0, fused[:-1]], 0.0), np.where(same_as_next, np.r_[fused[1:], 0.0], 0.0)
        )
        named = np.array([name.split()[0].lower() in q.text.lower() for name in speakers])[speaker_of].astype(float)
        named_months = ranking.named_months(q.text)
        dated = np.array([ranking.in_named_month(conv.dates[s], named_months) for s in session.tolist()], dtype=float)
        baseline = (fused + ranking.CONTEXT_WEIGHT * context) / (1.0 + ranking.CONTEXT_WEIGHT)
        baseline = baseline + ranking.DATE_WEIGHT * dated
        features = np.stack([cosine, coverage, bm, context, best, mean, neighbour, named, baseline, fused, dated], 1)
        pool = np.argsort(-baseline, kind="stable")[:POOL]
        evidence = set(q.evidence)
        relevant = np.array([conv.turns[i].dia_id in evidence for i in pool])
        out.append(Candidates(conv.name, features[pool], relevant, [conv.turns[i].dia_id for i in pool], q))
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


def session_features(c: Candidates) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The pool's sessions, a row of `SESSION_FEATURES` for each, and each candidate's session."""
    of = np.array([_session_of(d) for d in c.ids])
    sessions = sorted(set(of.tolist()))
    f = c.features
    rows = []
    for s in sessions:
        m = f[of == s]
        rows.append(
            [
                m[:, 4].max(),
                m[:, 3].max(),
                m[:, 0].max(),
                m[:, 1].max(),
                m[:, 2].max(),
                (m[:, 7] * m[:, 9]).max(),
                np.log1p(len(m)),
                m[:, 8].max(),
                np.sort(m[:, 9])[::-1][:3].mean(),
                m[:, 10].max(),
            ]
        )
    return sessions, np.array(rows), of


@dataclass(frozen=True)
class Model:
    """A turn model and a session model, each with the scaling of its training rows."""

    turn: tuple[np.ndarray, np.ndarray, np.ndarray]  # mean, std, weights
    session: tuple[np.ndarray, np.ndarray, np.ndarray]

    def scores(self, c: Candidates, lam: float) -> np.ndarray:
        mu, sd, w = self.turn
        turn = ((c.features - mu) / sd) @ w
        sessions, rows, of = session_features(c)
        smu, ssd, sw = self.session
        by_session = dict(zip(sessions, (((rows - smu) / ssd) @ sw).tolist(), strict=True))
        return turn + lam * np.array([by_session[s] for s in of.tolist()])


def train(pools: Sequence[Candidates]) -> Model:
    x = np.concatenate([c.features for c in pools])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    turn_w = pairwise_logistic([p for c in pools if (p := _pairs((c.features - mu) / sd, c.relevant)) is not None])
    per_session = []
    for c in pools:
        sessions, rows, _ = session_features(c)
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


def study(path: Path, embedder: Embedder | None = None) -> tuple[dict[str, dict[str, float]], list[dict[str, object]]]:
    """Baseline and learned rankers, leave one conversation out (the session weight picked nested):
    the pooled figures of each ranking, and each fold's pick."""
    emb = embedder or default_embedder()
    pools = {conv.name: candidates(conv, emb) for conv in locomo.read_dir(path)}
    names = list(pools)
    baseline: list[locomo.Outcome] = []
    fixed: dict[float, list[locomo.Outcome]] = {lam: [] for lam in LAMBDAS}
    nested: list[locomo.Outcome] = []
    folds: list[dict[str, object]] = []
    for held in names:
        inner: dict[float, list[locomo.Outcome]] = {lam: [] for lam in LAMBDAS}
        for val in (n for n in names if n != held):
            model = train([c for n in names if n not in (held, val) for c in pools[n]])
            for lam in LAMBDAS:
                inner[lam] += outcomes(pools[val], model=model, lam=lam)
        pick = max(LAMBDAS, key=lambda lam: (locomo.objective(inner[lam]), -lam))
        model = train([c for n in names if n != held for c in pools[n]])
        for lam in LAMBDAS:
            fixed[lam] += outcomes(pools[held], model=model, lam=lam)
        mine = outcomes(pools[held], model=model, lam=pick)
        nested += mine
        baseline += outcomes(pools[held])
        s = locomo.summarise(mine)
        folds.append({"held_out": held, "lambda": pick, "session_hit@1": s["session_hit@1"], "turn_r@5": s["turn_r@5"]})
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
    args = parser.parse_args(argv)
    rows, folds = study(args.path)
    print("| ranking | session Hit@1 | turn R@5 | turn R@1 | session NDCG@5 |\n|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in r.values()) + " |")
    for f in folds:
        print(
            f"- held out {f['held_out']}: session weight {f['lambda']} -> Hit@1 {f['session_hit@1']} / R@5 {f['turn_r@5']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
