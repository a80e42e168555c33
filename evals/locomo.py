"""LoCoMo-format retrieval eval: turns stored as memories, questions asked with `recall`.

The measurement protocol (``../shared/data/README.md``): every turn is stored as one
memory through the public API, with the speaker's name and the session number in its
text, written in session order with the store's clock at the session's date; each
question is asked one day after the last session. Scored:

* **turn R@k** (k = 1, 5, 10), categories 1-4: an evidence turn among the top k;
* **session Hit@1 and NDCG@5**, categories 1-5: sessions ranked by the best rank any of
  their turns reaches, relevant = the sessions holding an evidence turn.

Ranking settings are compared *leave one conversation out* (`loo`): the setting picked
on four conversations is reported on the fifth, in turn, so a figure says how a setting
does on a conversation it was not chosen on.

    python -m evals.locomo ../shared/data/locomo-dev            # default and each signal alone
    python -m evals.locomo ../shared/data/locomo-dev --json
    python -m evals.locomo ../shared/data/locomo-dev --only default --learned   # and "learned" fusion,
                                                  # its weights fitted on the other conversations

The data stays where it is: the eval takes a path and copies nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import memory_lakehouse as ml
from memory_lakehouse.capture import loaders

#: Ranks are read this deep: NDCG@5 over sessions needs the turns of five sessions.
DEPTH = 50
#: Questions of these categories count for turn recall (5, adversarial, has no answer in the
#: conversation; its evidence still names sessions, which count for the session measures).
TURN_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
#: What a fold's setting is picked by: mean of session Hit@1 (cats 1-5) and turn R@5 (cats 1-4),
#: the two figures the goal names.
OBJECTIVE = ("session_hit@1", "turn_r@5")
STEWARD = ml.Principal("locomo-eval", ml.Scope("locomo"), role="steward")


# ---------------------------------------------------------------------------- the format


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # normalised dia_ids that name a turn of the conversation


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: its sessions' dates, its turns in order, its questions."""

    name: str
    dates: dict[int, datetime]
    turns: list[Turn]
    questions: list[Question]
    unanswerable: int = 0  # questions whose evidence names no turn (left out)
    path: Path | None = None

    @property
    def asked_at(self) -> datetime:
        """One day after the last session: when every question is asked."""
        return max(self.dates.values()) + timedelta(days=1)


def parse_date(text: str) -> datetime:
    """A LoCoMo session date, e.g. ``"1:56 pm on 8 May, 2023"``, as an aware UTC datetime (the
    store's own loader reads it: one parser of the benchmark's dates).

    >>> parse_date("1:56 pm on 8 May, 2023").isoformat()
    '2023-05-08T13:56:00+00:00'
    """
    return loaders.parse_date(text, "locomo", "session", "date_time")


def normalise_evidence(raw: Sequence[str]) -> list[str]:
    """Evidence ids as ``D<session>:<turn>``: ``"D8:6; D9:17"`` is two, ``"D:11:26"`` is D11:26,
    ``"D30:05"`` is D30:5; anything else is dropped.

    >>> normalise_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D"])
    ['D8:6', 'D9:17', 'D11:26', 'D30:5']
    """
    out = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            m = re.fullmatch(r"D:?(\d+):(\d+)", part.strip())
            if m:
                out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return out


def read_conversation(path: Path) -> Conversation:
    """One LoCoMo-format JSON file (``speaker_a``, ``session_N``, ``session_N_date_time``, ``qa``)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if "conversation" in data:  # the release's list entries wrap the sessions
        data = {**data["conversation"], "qa": data.get("qa", [])}
    sessions = sorted(int(k.split("_")[1]) for k in data if re.fullmatch(r"session_\d+", k) and data[k])
    dates = {n: parse_date(data[f"session_{n}_date_time"]) for n in sessions}
    turns = [Turn(t["dia_id"], n, t["speaker"], t["text"]) for n in sessions for t in data[f"session_{n}"]]
    known = {t.dia_id for t in turns}
    questions, unanswerable = [], 0
    for qa in data.get("qa", []):
        evidence = tuple(e for e in normalise_evidence(qa.get("evidence", [])) if e in known)
        if not evidence:
            unanswerable += 1
            continue
        questions.append(Question(str(qa["question"]), int(qa["category"]), evidence))
    return Conversation(Path(path).stem, dates, turns, questions, unanswerable, Path(path))


def read_dir(path: Path) -> list[Conversation]:
    files = sorted(Path(path).glob("*.json"), key=lambda p: (len(p.stem), p.stem))
    if not files:
        raise FileNotFoundError(f"no LoCoMo-format *.json files in {path}")
    return [read_conversation(f) for f in files]


# ---------------------------------------------------------------------------- loading


def turn_text(turn: Turn) -> str:
    """What a stored turn says: the speaker and the session number, then the words."""
    return f"{turn.speaker} (session {turn.session}): {turn.text}"


#: How turns become memories: ``"reference"`` — a `Reference` per turn, its text `turn_text`
#: (the protocol's stand-in, what the issue's figures were measured with); ``"store"`` — the
#: store's own loader, ``store.load(path, format="locomo")``: `Turn` records (photo captions
#: appended), recalled with ``kinds=["turn"]``.
LOADERS = ("reference", "store")


def dia_id_of(hit: ml.Hit) -> str:
    """The LoCoMo turn id a hit stands for (from the Reference's uri, or the Turn's session and position)."""
    record: Any = hit.record
    if hit.kind == "turn":
        return f"D{int(str(record.session_id).rsplit('-', 1)[-1])}:{int(record.position) + 1}"
    return str(record.uri).rsplit("/", 1)[-1]


def turn_record(conv: Conversation, turn: Turn) -> ml.Reference:
    """The memory one turn becomes (the ``"reference"`` loader): what the store and the naive memory hold."""
    return ml.Reference(
        uri=f"locomo:{conv.name}/{turn.dia_id}",
        title=f"{turn.speaker} (session {turn.session})",
        content=turn.text,
        published_at=conv.dates[turn.session],
        source=f"locomo:{conv.name}",
        scope=STEWARD.scope,
    )


def load_conversation(
    store: ml.MemoryStore, conv: Conversation, clock: SimulatedClock, loader: str = "reference"
) -> dict[str, str]:
    """Write every turn, session by session, with the clock at the session's date; dia_id -> record_id
    (empty for the store's loader: its hits name their turn, `dia_id_of`).

    The one place that decides how a turn becomes a memory (`LOADERS`).
    """
    if loader == "store":
        if conv.path is None:
            raise ValueError("the store's loader reads a file: read the conversation with read_conversation")
        store.load(conv.path, format="locomo", by=STEWARD, progress=False)
        clock.set(conv.asked_at)
        return {}
    ids: dict[str, str] = {}
    for session in sorted(conv.dates):
        when = conv.dates[session]
        clock.set(when)
        turns = [t for t in conv.turns if t.session == session]
        records = [turn_record(conv, t) for t in turns]
        results = store.write_many(records, by=STEWARD, reason="locomo eval")
        ids.update((t.dia_id, r.record_id) for t, r in zip(turns, results, strict=True))
    clock.set(conv.asked_at)
    return ids


class SimulatedClock:
    """The store's clock, moved by the loader (a store's clock never goes back)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def set(self, when: datetime) -> None:
        self.now = max(self.now, when)

    def __call__(self) -> datetime:
        return self.now


# ---------------------------------------------------------------------------- scoring


@dataclass
class Outcome:
    """One question's result: the category, the evidence turns' best rank, the sessions' ranks."""

    category: int
    turn_rank: int | None
    session_ndcg5: float
    session_hit1: bool


def score_question(q: Question, ranked: Sequence[str]) -> Outcome:
    """Score one ranked list of dia_ids against the question's evidence."""
    evidence = set(q.evidence)
    turn_rank = next((i for i, d in enumerate(ranked, start=1) if d in evidence), None)
    sessions: list[int] = []
    for d in ranked:
        s = int(d[1:].split(":")[0])
        if s not in sessions:
            sessions.append(s)
    relevant = {int(e[1:].split(":")[0]) for e in evidence}
    dcg = sum(1.0 / math.log2(i + 2) for i, s in enumerate(sessions[:5]) if s in relevant)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(5, len(relevant))))
    return Outcome(q.category, turn_rank, dcg / idcg, bool(sessions) and sessions[0] in relevant)


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """turn R@1/5/10 over cats 1-4; session Hit@1 / NDCG@5 over cats 1-5; and per category."""
    turn = [o for o in outcomes if o.category in TURN_CATEGORIES]

    def r_at(k: int, rows: Sequence[Outcome]) -> float:
        return round(sum(1 for o in rows if o.turn_rank is not None and o.turn_rank <= k) / max(1, len(rows)), 3)

    def session(rows: Sequence[Outcome]) -> dict[str, float]:
        n = max(1, len(rows))
        return {
            "session_hit@1": round(sum(o.session_hit1 for o in rows) / n, 3),
            "session_ndcg@5": round(sum(o.session_ndcg5 for o in rows) / n, 3),
        }

    out: dict[str, Any] = {
        "questions": len(outcomes),
        "turn_r@1": r_at(1, turn),
        "turn_r@5": r_at(5, turn),
        "turn_r@10": r_at(10, turn),
        **session(outcomes),
    }
    out["by_category"] = {
        CATEGORY_NAMES[c]: {
            "questions": len(rows),
            **({"turn_r@5": r_at(5, rows)} if c in TURN_CATEGORIES else {}),
            **session(rows),
        }
        for c in sorted({o.category for o in outcomes})
        for rows in [[o for o in outcomes if o.category == c]]
    }
    return out


def objective(outcomes: Sequence[Outcome]) -> float:
    s = summarise(outcomes)
    return sum(s[m] for m in OBJECTIVE) / len(OBJECTIVE)


# ---------------------------------------------------------------------------- running


#: A setting under comparison: keyword arguments for `store.recall` (``signals=``, ``ranking=``),
#: or a function of the held-out conversation's name that gives them (a setting fitted on the
#: other conversations: `learned_settings`).
Setting = Mapping[str, Any] | Callable[[str], Mapping[str, Any]]
#: The settings `memlake eval retrieval` reports: the default and each signal alone.
SETTINGS: dict[str, Setting] = {"default": {}, "bm25": {"signals": ("bm25",)}, "vector": {"signals": ("vector",)}}


def learned_settings(
    path: Path, embedder: Any = None, *, folds: Mapping[str, Sequence[float]] | None = None
) -> dict[str, Setting]:
    """``"learned"`` fusion, its weights fitted on the other conversations of *path* for each
    held-out one (`evals.learned_ranker.fold_weights`; or *folds*: held-out name -> weights)."""
    if folds is None:
        from evals import learned_ranker

        folds = learned_ranker.fold_weights(path, embedder)
    return {
        "learned, fitted on the other conversations": lambda held: {
            "ranking": ml.Ranking(fusion="learned", weights=tuple(folds[held]))
        }
    }


def sweep_settings() -> dict[str, Setting]:
    """The grid ``--sweep`` compares (each fold picks one on the other conversations): fusion
    mode, the episode lexical weight and the context weight, through `ml.Ranking`."""
    out: dict[str, Setting] = {}
    for fusion, weights in (("convex", (0.1, 0.2, 0.3, 0.4)), ("minmax", (0.3, 0.5)), ("rrf", (0.5, 0.8))):
        for w in weights:
            for c in (0.0, 1.0, 2.0, 3.0):
                out[f"{fusion} w={w} context={c}"] = {
                    "ranking": ml.Ranking(fusion=fusion, episode_lexical_weight=w, context_weight=c)
                }
    return out


def run_conversation(
    conv: Conversation,
    settings: Mapping[str, Mapping[str, Any]],
    *,
    embedder: Any = None,
    open_options: Mapping[str, Any] | None = None,
    depth: int = DEPTH,
    loader: str = "reference",
) -> dict[str, Any]:
    """Load one conversation into a fresh store, ask every question under every setting."""
    clock = SimulatedClock(min(conv.dates.values()))
    with tempfile.TemporaryDirectory(prefix="memlake-locomo-") as root:
        store = ml.open(root, clock=clock, embedder=embedder, **dict(open_options or {}))
        with store:
            started = time.perf_counter()
            load_conversation(store, conv, clock, loader)
            load_s = time.perf_counter() - started
            kinds = {"kinds": ["turn"]} if loader == "store" else {}
            out: dict[str, Any] = {"load_s": round(load_s, 2), "settings": {}}
            for name, setting in settings.items():
                outcomes = []
                started = time.perf_counter()
                for q in conv.questions:
                    hits = store.recall(q.text, by=STEWARD, k=depth, **kinds, **dict(setting))  # type: ignore[arg-type]  # kinds= and ranking settings
                    outcomes.append(score_question(q, [dia_id_of(h) for h in hits]))
                out["settings"][name] = {
                    "outcomes": outcomes,
                    "ms_per_query": round((time.perf_counter() - started) * 1000 / max(1, len(conv.questions)), 2),
                }
    return out


def loo(
    per_conv: Mapping[str, Mapping[str, Sequence[Outcome]]], candidates: Sequence[str] | None = None
) -> dict[str, Any]:
    """Leave one conversation out: on each fold, the candidate with the best `objective` on the
    other conversations is reported on the held-out one.

    *per_conv*: conversation -> setting -> outcomes. With one candidate this is just that
    setting's per-conversation figures (nothing is picked).
    """
    convs = list(per_conv)
    names = list(candidates or next(iter(per_conv.values())))
    folds = []
    held: list[Outcome] = []
    for out in convs:
        train = [c for c in convs if c != out]
        pick = max(names, key=lambda n: (objective([o for c in train for o in per_conv[c][n]]), -names.index(n)))
        folds.append({"held_out": out, "picked": pick, **summarise(per_conv[out][pick])})
        held += per_conv[out][pick]
    measures = ("turn_r@1", "turn_r@5", "turn_r@10", "session_hit@1", "session_ndcg@5")
    mean = {m: round(sum(f[m] for f in folds) / len(folds), 3) for m in measures}
    return {"folds": folds, "mean_of_folds": mean, "pooled": summarise(held)}


def evaluate(
    paths: Sequence[Path] | Path,
    settings: Mapping[str, Setting] | None = None,
    *,
    embedder: Any = None,
    open_options: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    loader: str = "reference",
    pick: bool | None = None,
) -> dict[str, Any]:
    """Each setting on each conversation, leave-one-conversation-out figures per setting; with
    *pick* (by default: when there are more settings than `SETTINGS`), also the setting each
    fold picks on the other conversations."""
    convs = read_dir(paths) if isinstance(paths, Path) else [read_conversation(p) for p in paths]
    settings = dict(settings or SETTINGS)
    pick = len(settings) > len(SETTINGS) if pick is None else pick
    per_conv: dict[str, dict[str, list[Outcome]]] = {}
    timing: dict[str, dict[str, float]] = {}
    for conv in convs:
        if progress:
            progress(f"locomo {conv.name}: {len(conv.turns)} turns, {len(conv.questions)} questions")
        mine = {n: s(conv.name) if callable(s) else s for n, s in settings.items()}
        res = run_conversation(conv, mine, embedder=embedder, open_options=open_options, loader=loader)
        per_conv[conv.name] = {n: r["outcomes"] for n, r in res["settings"].items()}
        timing[conv.name] = {
            "load_s": res["load_s"],
            **{f"{n}_ms_per_query": r["ms_per_query"] for n, r in res["settings"].items()},
        }
    return {
        "conversations": {
            c.name: {
                "turns": len(c.turns),
                "sessions": len(c.dates),
                "questions": len(c.questions),
                "left_out_questions": c.unanswerable,
                **timing[c.name],
            }
            for c in convs
        },
        "loader": loader,
        "settings": {
            n: {k: str(v) for k, v in s.items()} if not callable(s) else {"per_fold": "fitted on the others"}
            for n, s in settings.items()
        },
        "results": {n: loo(per_conv, [n]) for n in settings},
        **({"picked_by_loo": loo(per_conv, list(settings))} if pick else {}),
        "per_conv": per_conv,
    }


MEASURES = ("turn_r@1", "turn_r@5", "turn_r@10", "session_hit@1", "session_ndcg@5")


def markdown(report: Mapping[str, Any]) -> str:
    convs = report["conversations"]
    lines = [
        f"LoCoMo — {len(convs)} conversations, {sum(c['turns'] for c in convs.values())} turns, "
        f"{sum(c['questions'] for c in convs.values())} questions (each conversation held out in turn)",
        "",
        "| ranking | turn R@1 | turn R@5 | turn R@10 | session Hit@1 | session NDCG@5 |",
        "|---|---|---|---|---|---|",
    ]
    for name, res in report["results"].items():
        p = res["pooled"]
        lines.append(f"| {name} | " + " | ".join(f"{p[m]:.3f}" for m in MEASURES) + " |")
    cats = sorted(
        {c for res in report["results"].values() for c in res["pooled"]["by_category"]},
        key=lambda c: list(CATEGORY_NAMES.values()).index(c),
    )
    lines += [
        "",
        "Per category (turn R@5 / session Hit@1):",
        "",
        "| ranking | " + " | ".join(cats) + " |",
        "|---|" + "---|" * len(cats),
    ]
    for name, res in report["results"].items():
        by = res["pooled"]["by_category"]
        lines.append(
            f"| {name} | "
            + " | ".join(
                (f"{by[c]['turn_r@5']:.3f} / " if "turn_r@5" in by[c] else "– / ") + f"{by[c]['session_hit@1']:.3f}"
                for c in cats
            )
            + " |"
        )
    lines += [
        "",
        "Per conversation (session Hit@1 / turn R@5):",
        "",
        "| ranking | " + " | ".join(convs) + " | mean |",
        "|---|" + "---|" * (len(convs) + 1),
    ]
    for name, res in report["results"].items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{f['session_hit@1']:.3f} / {f['turn_r@5']:.3f}" for f in res["folds"])
            + f" | {res['mean_of_folds']['session_hit@1']:.3f} / {res['mean_of_folds']['turn_r@5']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a folder of LoCoMo-format conversations (one JSON file each)")
    parser.add_argument("--embedder", choices=("default", "hashing"), default="default")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--loader",
        choices=LOADERS,
        default="reference",
        help="reference: one Reference per turn (the protocol's stand-in); store: store.load(...)",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also compare the ranking grid of `sweep_settings` (slow); each fold picks on the others",
    )
    parser.add_argument(
        "--learned",
        action="store_true",
        help='also "learned" fusion, its weights fitted on the other conversations (evals.learned_ranker)',
    )
    parser.add_argument(
        "--learned-weights",
        type=Path,
        help="with --learned: a JSON file of held-out conversation -> weights fitted on the others",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these of the settings (e.g. default)")
    args = parser.parse_args(argv)
    embedder = ml.HashingEmbedder(dim=384) if args.embedder == "hashing" else None
    settings = {**SETTINGS, **(sweep_settings() if args.sweep else {})}
    if args.only:
        settings = {n: s for n, s in settings.items() if n in args.only}
    if args.learned:
        folds = json.loads(args.learned_weights.read_text()) if args.learned_weights else None
        settings.update(learned_settings(args.path, embedder, folds=folds))
    report = evaluate(
        args.path,
        settings,
        embedder=embedder,
        progress=lambda m: print(m, file=sys.stderr),
        loader=args.loader,
        pick=args.sweep,
    )
    report.pop("per_conv")
    print(json.dumps(report, indent=2) if args.json else markdown(report))
    if "picked_by_loo" in report and not args.json:
        res = report["picked_by_loo"]
        print("\nPicked leave-one-conversation-out (held out: pick -> session Hit@1 / turn R@5):\n")
        for f in res["folds"]:
            print(f"- {f['held_out']}: {f['picked']} -> {f['session_hit@1']:.3f} / {f['turn_r@5']:.3f}")
        p = res["pooled"]
        print(f"- pooled: {p['session_hit@1']:.3f} / {p['turn_r@5']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
