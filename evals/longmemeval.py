"""LongMemEval-format retrieval eval: each question's haystack loaded by the store, asked with `recall`.

LongMemEval (Wu et al., 2024) gives every question its own haystack of dated chat
sessions and marks the turns that hold the answer (``has_answer``) and the sessions
(``answer_session_ids``). Its retrieval protocol ranks the haystack for the question and
scores the ranking against those marks. Here each question's haystack goes into a fresh
store through the store's own loader (``store.load(file, format="longmemeval")``: one
commit per session at its date, `Turn` records), the question is asked at its
``question_date`` with ``kinds=["turn"]``, and the naive memory ranks the same turns.

Scored per question type (abstention questions, ``_abs``, have nothing to retrieve and
are left out, as in the benchmark):

* **turn R@k** (k = 1, 5, 10): a ``has_answer`` turn among the top k turns;
* **session recall_all@5**: every answer session among the first five sessions (sessions
  ranked by the best rank any of their turns reaches), LongMemEval's strict measure;
* **session Hit@1 and NDCG@5**, relevant = the answer sessions.

Nothing is tuned here, so nothing is held out: each ranking is measured as shipped.

The data: any LongMemEval-format file (``longmemeval_s.json``; the eval takes a path and
copies nothing), else a **generated** sample (`generate`) in the benchmark's layout with
its six question types, written here, so its figures say the format works end to end and
how the signals compare on it, not how the store does on the benchmark itself.

    python -m evals.longmemeval                              # the generated sample
    python -m evals.longmemeval longmemeval_s.json --limit 100 --json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import memory_lakehouse as ml
from memory_lakehouse.capture import loaders

from .locomo import SimulatedClock  # the loader pins it at each session's date; the question moves it on
from .naive import NaiveItem, NaiveMemory

#: Ranks are read this deep: NDCG@5 over sessions needs the turns of five sessions.
DEPTH = 50
#: The question types of LongMemEval, in the paper's order.
QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
STEWARD = ml.Principal("longmemeval-eval", ml.Scope("longmemeval"), role="steward")
#: The settings compared: the default ranking and each signal alone (as `evals.locomo`).
SETTINGS: dict[str, Mapping[str, Any]] = {
    "default": {},
    "bm25": {"signals": ("bm25",)},
    "vector": {"signals": ("vector",)},
}
MEASURES = ("turn_r@1", "turn_r@5", "turn_r@10", "session_recall_all@5", "session_hit@1", "session_ndcg@5")


# ---------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Outcome:
    """One question's result under one ranking."""

    question_type: str
    turn_rank: int | None  # the best rank of a has_answer turn
    session_recall_all5: bool
    session_hit1: bool
    session_ndcg5: float


def score_question(question: loaders.Question, ranked: Sequence[tuple[str, int]]) -> Outcome:
    """Score a ranked list of ``(session_id, position)`` turns against the question's marks.

    >>> q = loaders.Question("q", "?", "a", None, "multi-session", (("s2", 1), ("s5", 0)), ("s2", "s5"))
    >>> o = score_question(q, [("s1", 0), ("s2", 1), ("s1", 3), ("s5", 0)])
    >>> o.turn_rank, o.session_recall_all5, o.session_hit1, round(o.session_ndcg5, 3)
    (2, True, False, 0.693)
    """
    evidence = set(question.evidence)
    turn_rank = next((i for i, t in enumerate(ranked, start=1) if t in evidence), None)
    sessions: list[str] = []
    for sid, _ in ranked:
        if sid not in sessions:
            sessions.append(sid)
    relevant = set(question.answer_session_ids) or {sid for sid, _ in evidence}
    dcg = sum(1.0 / math.log2(i + 2) for i, s in enumerate(sessions[:5]) if s in relevant)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(5, len(relevant))))
    return Outcome(
        question.category,
        turn_rank,
        bool(relevant) and relevant <= set(sessions[:5]),
        bool(sessions) and sessions[0] in relevant,
        dcg / idcg if idcg else 0.0,
    )


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The measures over every question, and per question type."""

    def row(rows: Sequence[Outcome]) -> dict[str, Any]:
        n = max(1, len(rows))

        def r_at(k: int) -> float:
            return round(sum(1 for o in rows if o.turn_rank is not None and o.turn_rank <= k) / n, 3)

        return {
            "questions": len(rows),
            "turn_r@1": r_at(1),
            "turn_r@5": r_at(5),
            "turn_r@10": r_at(10),
            "session_recall_all@5": round(sum(o.session_recall_all5 for o in rows) / n, 3),
            "session_hit@1": round(sum(o.session_hit1 for o in rows) / n, 3),
            "session_ndcg@5": round(sum(o.session_ndcg5 for o in rows) / n, 3),
        }

    types = sorted(
        {o.question_type for o in outcomes},
        key=lambda t: (QUESTION_TYPES.index(t) if t in QUESTION_TYPES else len(QUESTION_TYPES), t),
    )
    return {**row(outcomes), "by_type": {t: row([o for o in outcomes if o.question_type == t]) for t in types}}


# ---------------------------------------------------------------------------- running


def read(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The instances of a LongMemEval-format file (a JSON list), the first *limit* of them."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: a LongMemEval file is a JSON list of questions")
    return data[:limit] if limit else data


def naive_items(sessions: Iterable[loaders.Session]) -> list[NaiveItem]:
    """The same turns as rows of the naive memory (text as said; the label names the turn)."""
    return [
        NaiveItem(
            record_id=f"{s.session_id}#{t.position}",
            kind="turn",
            text=t.text,
            entity=t.role,
            org=STEWARD.scope.org,
            scope=STEWARD.scope.path,
            source="longmemeval",
            evidence=None,
            event_time=s.date,
            ingested_at=s.date,
            label=f"{s.session_id}#{t.position}",
        )
        for s in sessions
        for t in s.turns
    ]


def run_instance(
    instance: Mapping[str, Any],
    settings: Mapping[str, Mapping[str, Any]],
    *,
    open_store: Callable[[Path, SimulatedClock], Any],
    naive: NaiveMemory | None = None,
    depth: int = DEPTH,
) -> dict[str, Outcome] | None:
    """One question: its haystack into a fresh store (and the naive memory), ranked under every
    setting; None for an abstention question (nothing to retrieve)."""
    with tempfile.TemporaryDirectory(prefix="memlake-lme-") as tmp:
        path = Path(tmp) / "instance.json"
        path.write_text(json.dumps([instance]), encoding="utf-8")
        sessions, (question,) = loaders.parse_longmemeval(path)
        if question.abstention:
            return None
        clock = SimulatedClock(min(s.date for s in sessions))
        store = open_store(Path(tmp) / "store", clock)
        try:
            store.load(path, format="longmemeval", by=STEWARD, progress=False)
            clock.set(max([question.question_date or clock.now, *(s.date for s in sessions)]))
            out = {}
            for name, setting in settings.items():
                hits = store.recall(question.question, by=STEWARD, k=depth, kinds=["turn"], **dict(setting))
                out[name] = score_question(question, [(h.record.session_id, int(h.record.position)) for h in hits])
        finally:
            store.close()
    if naive is not None:
        naive.add(naive_items(sessions))
        ranked = [h.item.label.rsplit("#", 1) for h in naive.search(question.question, org=STEWARD.scope.org, k=depth)]
        out["naive"] = score_question(question, [(sid, int(pos)) for sid, pos in ranked])
    return out


def evaluate(
    instances: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    embedder: Any = None,
    naive: Callable[[], NaiveMemory] | None = None,
    open_store: Callable[[Path, SimulatedClock], Any] | None = None,
    tick: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every setting (and the naive memory, given its factory) on every question; a summary each."""
    settings = dict(settings or SETTINGS)
    opener = open_store or (lambda root, clock: ml.open(str(root), clock=clock, embedder=embedder))
    per: dict[str, list[Outcome]] = {}
    abstentions = 0
    started = time.perf_counter()
    for n, instance in enumerate(instances):
        res = run_instance(instance, settings, open_store=opener, naive=naive() if naive else None)
        if res is None:
            abstentions += 1
        else:
            for name, outcome in res.items():
                per.setdefault(name, []).append(outcome)
        if tick:
            tick(n + 1, len(instances))
    return {
        "questions": len(instances) - abstentions,
        "abstention_questions_left_out": abstentions,
        "seconds": round(time.perf_counter() - started, 1),
        "results": {name: summarise(outcomes) for name, outcomes in per.items()},
    }


def markdown(report: Mapping[str, Any], data: str) -> str:
    lines = [
        f"LongMemEval format — {data}: {report['questions']} questions "
        f"({report['abstention_questions_left_out']} abstention questions left out)",
        "",
        "| ranking | turn R@1 | turn R@5 | turn R@10 | session recall_all@5 | session Hit@1 | session NDCG@5 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, res in report["results"].items():
        lines.append(f"| {name} | " + " | ".join(f"{res[m]:.3f}" for m in MEASURES) + " |")
    types = list(next(iter(report["results"].values()))["by_type"]) if report["results"] else []
    lines += ["", "Per question type (turn R@5 / session recall_all@5):", ""]
    lines += ["| ranking | " + " | ".join(types) + " |", "|---|" + "---|" * len(types)]
    for name, res in report["results"].items():
        by = res["by_type"]
        lines.append(
            f"| {name} | "
            + " | ".join(f"{by[t]['turn_r@5']:.3f} / {by[t]['session_recall_all@5']:.3f}" for t in types)
            + " |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the generated sample

_FILLER: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # topic: (details, user lines, assistant lines); {d} is the session's detail
    "cooking": (
        ("a mushroom risotto", "shakshuka", "a lemon tart", "pad thai", "sourdough bread"),
        (
            "I want to try making {d} this weekend, any tips?",
            "Last time I made {d} it came out a bit bland.",
            "Do I need any special equipment for {d}?",
        ),
        (
            "For {d}, prepare everything before you start and taste as you go.",
            "Salt in stages and add acid at the end; it lifts {d} a lot.",
            "A heavy pan is enough for {d}; nothing fancy needed.",
        ),
    ),
    "travel": (
        ("Lisbon", "Kyoto", "Vancouver", "Marrakesh", "Edinburgh"),
        (
            "I'm thinking about a trip to {d} next spring.",
            "How many days would you spend in {d}?",
            "Is public transport in {d} easy for visitors?",
        ),
        (
            "{d} is lovely in spring; book your lodging early.",
            "Four or five days in {d} covers the main sights at an easy pace.",
            "Yes, a day pass makes getting around {d} simple.",
        ),
    ),
    "fitness": (
        ("running", "swimming", "kettlebell training", "yoga", "cycling"),
        (
            "I've been doing {d} three times a week.",
            "My knees hurt a little after {d}, is that normal?",
            "How do I keep motivated with {d} in winter?",
        ),
        (
            "Consistency with {d} matters more than intensity.",
            "Some soreness after {d} is common; sharp pain is a reason to rest.",
            "A fixed schedule and a friend to train with help with {d}.",
        ),
    ),
    "work": (
        ("a new ticketing tool", "quarterly planning", "a database migration", "hiring", "an audit"),
        (
            "My team is busy with {d} this month.",
            "I have a meeting about {d} tomorrow and I'm nervous.",
            "Any advice on presenting progress on {d}?",
        ),
        (
            "Break {d} into small milestones so progress is visible.",
            "Write down the three points you want to make about {d}.",
            "Lead with the outcome, then the risks of {d}.",
        ),
    ),
    "books": (
        ("a mystery novel", "a biography of Ada Lovelace", "a science fiction trilogy", "a poetry collection"),
        (
            "I just started reading {d}.",
            "I'm halfway through {d} and can't put it down.",
            "Can you suggest something similar to {d}?",
        ),
        (
            "Enjoy {d}; the middle chapters are often the best part.",
            "If you like {d}, try another from the same author.",
            "Reading a little every evening is a good way through {d}.",
        ),
    ),
    "garden": (
        ("basil", "tomato plants", "a fig tree", "succulents", "lavender"),
        (
            "The {d} on my balcony keep wilting.",
            "When should I repot my {d}?",
            "Do {d} need full sun?",
        ),
        (
            "{d} usually need regular watering and some afternoon shade.",
            "Repot {d} in spring, one pot size up.",
            "Most {d} like six hours of sun a day.",
        ),
    ),
    "tech": (
        ("my laptop", "the home router", "my phone", "the printer"),
        (
            "{d} has been really slow lately.",
            "Should I replace {d} or try to fix it?",
            "{d} keeps disconnecting from the wifi.",
        ),
        (
            "Restart {d} and install pending updates first.",
            "If {d} is more than five years old, replacing it may be cheaper.",
            "Move {d} closer to the access point and check for interference.",
        ),
    ),
}


@dataclass(frozen=True)
class _Evidence:
    """The turns that answer a question, one list of (role, text) per answer session, in date order."""

    question_type: str
    question: str
    answer: str
    sessions: tuple[tuple[tuple[str, str], ...], ...]
    distractor: tuple[tuple[str, str], ...] = ()  # a turn on the same theme that answers nothing


def _evidence(rng: random.Random, asked: datetime, dates: Sequence[datetime]) -> tuple[_Evidence, list[int]]:
    """One question of a random type and where its answer sessions sit among *dates* (indices)."""
    kind = rng.choice(QUESTION_TYPES)
    n = len(dates)
    at = sorted(rng.sample(range(n), 2)) if kind in ("multi-session", "knowledge-update") else [rng.randrange(n)]
    if kind == "single-session-user":
        relation, name, city = (
            rng.choice(("sister", "brother", "cousin", "best friend")),
            rng.choice(("Maya", "Jonas", "Ines", "Tariq", "Olu")),
            rng.choice(("Denver", "Rotterdam", "Porto", "Halifax", "Adelaide")),
        )
        ev = _Evidence(
            kind,
            f"Where did my {relation} move to?",
            city,
            ((("user", f"Oh, and my {relation} {name} finally relocated to {city} last week."),),),
            (("user", f"My neighbour is thinking of moving house next year, she says {relation}s help."),),
        )
    elif kind == "single-session-assistant":
        genre, title = (
            rng.choice(("history", "science", "true crime", "comedy")),
            rng.choice(("The Long Fuse", "Small Wonders", "Night Ledger", "Field Notes")),
        )
        ev = _Evidence(
            kind,
            f"What was the name of the {genre} podcast you recommended to me?",
            title,
            (
                (
                    ("user", f"I need something to listen to on my commute, I like {genre}."),
                    ("assistant", f"You might enjoy '{title}': short {genre} episodes, easy to follow."),
                ),
            ),
            (("user", "My commute got longer since the bridge closed."),),
        )
    elif kind == "single-session-preference":
        diet = rng.choice(("vegetarian", "vegan", "pescatarian"))
        ev = _Evidence(
            kind,
            "Can you suggest a dinner recipe for me tonight?",
            f"something {diet}",
            ((("user", f"Just so you know, I've been {diet} for two years and I love spicy dishes."),),),
        )
    elif kind == "multi-session":
        hobby, first, second = (
            rng.choice(("camping", "climbing", "kayaking")),
            rng.choice(("a new tent", "a headlamp", "a dry bag")),
            rng.choice(("a sleeping pad", "trekking poles", "a water filter")),
        )
        ev = _Evidence(
            kind,
            f"How many pieces of {hobby} gear did I buy?",
            "two",
            (
                (("user", f"I bought {first} for my {hobby} trips today."),),
                (("user", f"Also picked up {second}, the old one was worn out, for {hobby}."),),
            ),
            (("user", f"A friend asked me to join a {hobby} weekend but I said no."),),
        )
    elif kind == "knowledge-update":
        old, new, company = (
            rng.choice(("junior analyst", "support engineer", "staff nurse")),
            rng.choice(("team lead", "senior analyst", "charge nurse")),
            rng.choice(("Northwind", "Contoso", "Globex")),
        )
        ev = _Evidence(
            kind,
            "What is my current job title?",
            new,
            (
                (("user", f"I work at {company} as a {old}, it's been a steady job."),),
                (("user", f"Big news: I was promoted to {new} at {company}!"),),
            ),
            (("user", f"My cousin also applied for a job at {company} last year."),),
        )
    else:  # temporal-reasoning
        activity = rng.choice(("cello", "pottery", "Spanish", "salsa dancing"))
        ev = _Evidence(
            kind,
            f"How many days ago did I start my {activity} lessons?",
            f"{(asked - dates[at[0]]).days} days",
            ((("user", f"Today I had my very first {activity} lesson, so exciting."),),),
        )
    return ev, at


def _filler(rng: random.Random, topic: str) -> list[dict[str, Any]]:
    details, users, assistants = _FILLER[topic]
    d = rng.choice(details)
    turns = []
    for u, a in zip(rng.sample(users, 2), rng.sample(assistants, 2), strict=True):
        turns += [{"role": "user", "content": u.format(d=d)}, {"role": "assistant", "content": a.format(d=d)}]
    return turns


def _at(turns: list[dict[str, Any]], rng: random.Random, lines: Sequence[tuple[str, str]], answer: bool) -> None:
    """Put *lines* into a session's turns at an even position (a user turn starts each exchange)."""
    at = 2 * rng.randrange(len(turns) // 2 + 1)
    turns[at:at] = [{"role": r, "content": c, **({"has_answer": True} if answer else {})} for r, c in lines]


def generate(seed: int, instances: int, sessions: int = 24) -> list[dict[str, Any]]:
    """A sample in LongMemEval's layout: each question its own haystack of *sessions* dated
    sessions (two exchanges on a random topic each), its answer turns (``has_answer``) placed
    in one or two of them and, for most types, a turn on the same theme that answers nothing
    in two others.

    Question types are drawn evenly from `QUESTION_TYPES`; no ``_abs`` questions (abstention
    has its own eval). The wording of a question shares some words with its answer and some
    with its distractor, so neither signal alone has it easy.
    """
    rng = random.Random(seed)
    out = []
    for i in range(instances):
        start = datetime(2023, 1, 2, 9, 0, tzinfo=UTC) + timedelta(days=rng.randrange(200))
        dates = [start + timedelta(days=3 * n + rng.randrange(3), hours=rng.randrange(10)) for n in range(sessions)]
        asked = dates[-1] + timedelta(days=1 + rng.randrange(5))
        ev, at = _evidence(rng, asked, dates)
        bodies = [_filler(rng, rng.choice(sorted(_FILLER))) for _ in range(sessions)]
        for lines, where in zip(ev.sessions, at, strict=True):
            _at(bodies[where], rng, lines, answer=True)
        if ev.distractor:  # in two sessions that hold no answer
            for where in rng.sample([n for n in range(sessions) if n not in at], 2):
                _at(bodies[where], rng, ev.distractor, answer=False)
        ids = [f"lme{seed}-{i}-s{n}" for n in range(sessions)]
        out.append(
            {
                "question_id": f"lme{seed}-{i}",
                "question_type": ev.question_type,
                "question": ev.question,
                "answer": ev.answer,
                "question_date": asked.strftime("%Y/%m/%d (%a) %H:%M"),
                "haystack_session_ids": ids,
                "haystack_dates": [d.strftime("%Y/%m/%d (%a) %H:%M") for d in dates],
                "haystack_sessions": bodies,
                "answer_session_ids": [ids[n] for n in at],
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="a LongMemEval-format file (default: a generated sample)")
    parser.add_argument("--limit", type=int, default=None, help="the first N questions of the file")
    parser.add_argument("--generated", type=int, default=60, help="questions in the generated sample")
    parser.add_argument("--seed", type=int, default=150_010, help="the generated sample's seed")
    parser.add_argument("--embedder", choices=("default", "hashing"), default="default")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    embedder = ml.HashingEmbedder(dim=384) if args.embedder == "hashing" else ml.MiniLMEmbedder()
    if args.path:
        instances, data = read(args.path, args.limit), str(args.path)
    else:
        instances, data = generate(args.seed, args.generated), f"generated (seed {args.seed})"
    report = evaluate(
        instances,
        embedder=embedder,
        naive=lambda: NaiveMemory(embedder),
        tick=lambda done, total: print(f"{done}/{total} questions", file=sys.stderr) if done % 10 == 0 else None,
    )
    print(json.dumps({"data": data, **report}, indent=2) if args.json else markdown(report, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
