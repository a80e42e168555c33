"""Abstention: when the answer is not in memory, say "nothing relevant" (seed 001).

Three question sets, each scored as precision and recall of "nothing relevant" (the
positive class is a question whose answer is not in memory for the asker):

- **generated**: members' facts in a team's memory; questions ask about a fact that was
  never stored, one stored only in another team's scope, one about a forgotten member,
  one learned after the time asked about — and about facts that are there;
- **LongMemEval format, generated**: a sample in LongMemEval's layout (a haystack of
  sessions per question; ``_abs`` question ids have no answer in their haystack);
- **LoCoMo category 5** (with ``--data`` pointing at the LoCoMo dev conversations): every
  turn one memory, each question asked a day after the last session; category 5
  (adversarial: the answer is not in the conversation) should abstain, 1–4 should not.

The rule: abstain when no hit comes back, or the best hit's score is below a threshold.
The threshold is chosen per memory (hit.score for this store, cosine for the naive one)
on a tuning split — by a hash of the question id on generated data, and
leave-one-conversation-out on LoCoMo (chosen on four conversations, reported on the
fifth, rotated) — as the value with the best F1; the scorecard states it.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import memory_lakehouse as ml

from .core import UTC, Context, EvalResult, Event, Gate, Metric, SimClock, day, ingest, naive_item, rate

NAME = "abstention"
TEAM, OTHER = ml.Scope("acme", "members", "a"), ml.Scope("acme", "members", "b")
CURATOR = ml.Principal("members-curator", ml.Scope("acme", "members"), role="curator")
DPO = ml.Principal("dpo", ml.Scope("acme"), role="steward")
ASKER = ml.Principal("concierge", ml.Scope("acme", "members", "a", "concierge"), role="agent")
ATTRS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "home_city": ("which city does {s} live in", "{s} lives in {v}", ("Lisbon", "Kyoto", "Denver", "Tallinn")),
    "employer": ("who does {s} work for", "{s} works at {v}", ("Maersk", "Siemens", "a bakery", "the city council")),
    "pet": ("what pet does {s} have", "{s} has a pet {v}", ("beagle", "parrot", "tortoise", "cat")),
    "food": ("what is {s}'s favourite food", "{s}'s favourite food is {v}", ("ramen", "paella", "pierogi", "tacos")),
    "car": ("what car does {s} drive", "{s} drives a {v}", ("Volvo estate", "Fiat 500", "Tesla", "pickup truck")),
    "hobby": (
        "what hobby does {s} have",
        "{s} spends weekends {v}",
        ("bouldering", "sailing", "birdwatching", "woodworking"),
    ),
}


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    subject: str
    absent: bool
    why: str  # answerable | never stored | another scope | forgotten | learned later | locomo cat N | lme
    as_of: datetime | None = None
    attribute: str = ""


def split_of(qid: str) -> str:
    return ("tune", "test")[hashlib.sha256(f"abstention:{qid}".encode()).digest()[0] % 2]


def generate(seed: int, members: int) -> tuple[list[Event], list[Question], list[str], datetime]:
    rng = random.Random(seed)
    events: list[Event] = []
    questions: list[Question] = []
    forgotten: list[str] = []
    asked_at = day(50)
    for m in range(members):
        s = f"member-{m:03d}"
        have = rng.sample(sorted(ATTRS), 3)
        fate = rng.random()
        for n, attr in enumerate(have):
            q, fmt, values = ATTRS[attr]
            later = fate > 0.8 and n == 0
            scope = OTHER if 0.6 < fate <= 0.8 and n == 0 else TEAM
            at = asked_at + timedelta(days=5) if later else day(rng.uniform(0, 40))
            events.append(
                Event(
                    at,
                    CURATOR,
                    ml.Fact(
                        s,
                        attr,
                        fmt.format(s=s, v=rng.choice(values)),
                        at,
                        source="intake@v2",
                        evidence=f"form:{s}/{attr}",
                    ),
                    scope=scope,
                )
            )
            why = "learned later" if later else "another scope" if scope == OTHER else "answerable"
            questions.append(Question(f"{s}-{attr}", q.format(s=s), s, why != "answerable", why, asked_at, attr))
        missing = rng.choice([a for a in ATTRS if a not in have])
        questions.append(Question(f"{s}-{missing}", ATTRS[missing][0].format(s=s), s, True, "never stored", asked_at))
        if 0.5 < fate <= 0.6:
            forgotten.append(s)
    questions = [
        q if q.subject not in forgotten else Question(q.qid, q.text, q.subject, True, "forgotten", q.as_of, q.attribute)
        for q in questions
    ]
    return events, questions, forgotten, asked_at


def longmemeval_sample(seed: int, instances: int) -> list[dict[str, Any]]:
    """A generated sample in LongMemEval's layout; ``_abs`` ids ask what the haystack never says."""
    rng = random.Random(seed)
    out = []
    for i in range(instances):
        s = rng.choice(("Priya", "Tomas", "Amara", "Lena", "Kofi", "Mei"))
        said = rng.sample(sorted(ATTRS), 3)
        sessions = [
            [
                {"role": "user", "content": ATTRS[a][1].format(s=s, v=rng.choice(ATTRS[a][2]))},
                {"role": "assistant", "content": "Noted, thanks for telling me."},
            ]
            for a in said
        ]
        absent = i % 2 == 1
        attr = rng.choice([a for a in ATTRS if a not in said]) if absent else rng.choice(said)
        out.append(
            {
                "question_id": f"lme-{i:04d}" + ("_abs" if absent else ""),
                "question_type": "single-session-user",
                "question": ATTRS[attr][0].format(s=s),
                "answer": "" if absent else "in the haystack",
                "haystack_dates": [f"2023/05/{10 + n:02d} (Wed) 10:00" for n in range(len(sessions))],
                "haystack_session_ids": [f"s{i}-{n}" for n in range(len(sessions))],
                "haystack_sessions": sessions,
            }
        )
    return out


# ---------------------------------------------------------------- scoring


def best_threshold(scores: Sequence[float | None], absent: Sequence[bool]) -> float:
    """The threshold with the best F1 of "nothing relevant" (abstain when score < threshold)."""
    candidates = sorted({round(s, 4) for s in scores if s is not None} | {0.0}) + [1e9]
    best = (-1.0, 0.0)
    for th in candidates:
        p, r = pr([s is None or s < th for s in scores], absent)
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        if f1 > best[0]:
            best = (f1, th)
    return best[1]


def f1(row: dict[str, float]) -> float:
    p, r = row["precision"], row["recall"]
    return 2 * p * r / (p + r) if p + r else 0.0


def pr(abstained: Sequence[bool], absent: Sequence[bool]) -> tuple[float, float]:
    tp = sum(1 for a, t in zip(abstained, absent, strict=True) if a and t)
    return rate(tp, sum(abstained)), rate(tp, sum(absent))


def judge(
    scores: dict[str, list[float | None]], qs: Sequence[Question], tune: Callable[[int], bool]
) -> dict[str, dict[str, float]]:
    """Per memory: threshold on the tuning questions, precision and recall on the others."""
    out = {}
    for side, values in scores.items():
        tuning = [i for i in range(len(qs)) if tune(i)]
        th = best_threshold([values[i] for i in tuning], [qs[i].absent for i in tuning])
        held = [i for i in range(len(qs)) if not tune(i)]
        held_values = [values[i] for i in held]
        p, r = pr([v is None or v < th for v in held_values], [qs[i].absent for i in held])
        out[side] = {"threshold": th, "precision": p, "recall": r, "questions": len(held)}
    return out


def ask(store: Any, naive: Any, q: Question, k: int = 5) -> tuple[float | None, float | None]:
    hits = store.recall(q.text, by=ASKER, subject=q.subject, k=k, kinds=["fact", "reference"], as_of=q.as_of)
    top = hits[0].score if hits else None
    nh = naive.search(q.text, org="acme", entity=q.subject, k=k)
    return top, (nh[0].score if nh else None)


# ---------------------------------------------------------------- the three sets

OUT_OF_REACH = ("another scope", "forgotten", "learned later")


def run_generated(ctx: Context, seed: int) -> tuple[dict[str, dict[str, float]], int, dict[str, int]]:
    events, questions, forgotten, asked_at = generate(seed, ctx.size("abstention.members", 12, 80))
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    ingest(events, store, naive, clock)
    clock.set(asked_at + timedelta(days=10))
    for s in forgotten:
        store.forget(s, by=DPO, reason="member left")
        naive.delete(s)
    scores: dict[str, list[float | None]] = {"ours": [], "naive": []}
    reach = {"ours": 0, "naive": 0, "questions": 0}
    for n, q in enumerate(questions):
        ours, theirs = ask(store, naive, q)
        scores["ours"].append(ours)
        scores["naive"].append(theirs)
        if q.why in OUT_OF_REACH:  # the answer exists, but not for this asker at this time
            reach["questions"] += 1
            reach["ours"] += any(
                h.record.subject_name == q.subject and getattr(h.record, "attribute", "") == q.attribute
                for h in store.recall(q.text, by=ASKER, subject=q.subject, k=5, as_of=q.as_of)
            )
            reach["naive"] += any(
                h.item.payload.get("attribute") == q.attribute
                for h in naive.search(q.text, org="acme", entity=q.subject, k=5)
            )
        ctx.tick(NAME, n + 1, len(questions))
    why: dict[str, int] = {
        "out_of_reach_answers_served_ours": reach["ours"],
        "out_of_reach_answers_served_naive": reach["naive"],
        "out_of_reach_questions": reach["questions"],
    }
    for q in questions:
        why[q.why] = why.get(q.why, 0) + 1
    return judge(scores, questions, lambda i: split_of(questions[i].qid) == "tune"), len(questions), why


def run_longmemeval(ctx: Context, sample: list[dict[str, Any]]) -> tuple[dict[str, dict[str, float]], int]:
    clock = SimClock(datetime(2023, 5, 1, tzinfo=UTC))
    store = ctx.open_store(f"{NAME}-lme", clock)
    naive = ctx.naive()
    questions = []
    for inst in sample:
        subject = f"lme:{inst['question_id']}"
        for n, (date, session) in enumerate(zip(inst["haystack_dates"], inst["haystack_sessions"], strict=True)):
            at = datetime.strptime(date.split(" (")[0], "%Y/%m/%d").replace(tzinfo=UTC) + timedelta(hours=10)
            for t, turn in enumerate(session):
                if turn["role"] != "user":
                    continue
                record = ml.Reference(
                    f"lme://{inst['question_id']}/{n}/{t}",
                    f"session {n}",
                    turn["content"],
                    at,
                    subject=subject,
                    source="longmemeval-format@generated",
                )
                clock.set(at)
                res = store.write(record, by=CURATOR, scope=TEAM)
                naive.add([naive_item(record, res.record_id, TEAM, at)])
        questions.append(
            Question(inst["question_id"], inst["question"], subject, inst["question_id"].endswith("_abs"), "lme")
        )
    clock.set(datetime(2023, 7, 1, tzinfo=UTC))
    scores: dict[str, list[float | None]] = {"ours": [], "naive": []}
    for q in questions:
        ours, theirs = ask(store, naive, q)
        scores["ours"].append(ours)
        scores["naive"].append(theirs)
    return judge(scores, questions, lambda i: split_of(questions[i].qid) == "tune"), len(questions)


def _locomo_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def run_locomo(ctx: Context, folder: Path) -> tuple[dict[str, dict[str, float]], int, int] | None:
    files = sorted(folder.glob("*.json"))
    if not files:
        return None
    clock = SimClock(datetime(2020, 1, 1, tzinfo=UTC))
    store = ctx.open_store(f"{NAME}-locomo", clock)
    naive = ctx.naive()
    questions: list[Question] = []
    conv_of: list[str] = []
    for file in files:
        conv = json.loads(file.read_text(encoding="utf-8"))
        subject = f"locomo:{file.stem}"
        last = datetime(2020, 1, 1, tzinfo=UTC)
        n = 1
        while f"session_{n}" in conv:
            at = _locomo_time(conv[f"session_{n}_date_time"])
            last = max(last, at)
            records = [
                ml.Reference(
                    f"locomo://{file.stem}/{turn['dia_id']}",
                    f"{turn['speaker']}, session {n}",
                    f"{turn['speaker']} (session {n}): {turn['text']}",
                    at,
                    subject=subject,
                    source="locomo-dev",
                )
                for turn in conv[f"session_{n}"]
            ]
            clock.set(at)
            result = store.write_many(records, by=CURATOR, scope=TEAM)
            naive.add([naive_item(r, res.record_id, TEAM, at) for r, res in zip(records, result, strict=True)])
            n += 1
        for i, qa in enumerate(conv["qa"]):
            questions.append(
                Question(
                    f"{file.stem}-{i}",
                    str(qa["question"]),
                    subject,
                    qa.get("category") == 5,
                    f"locomo cat {qa.get('category')}",
                    last + timedelta(days=1),
                )
            )
            conv_of.append(file.stem)
        ctx.tick(f"{NAME} (locomo)", len(questions), len(questions))
    clock.set(max(q.as_of for q in questions if q.as_of) + timedelta(days=1))
    scores: dict[str, list[float | None]] = {"ours": [], "naive": []}
    for n, q in enumerate(questions):
        ours, theirs = ask(store, naive, q)
        scores["ours"].append(ours)
        scores["naive"].append(theirs)
        ctx.tick(f"{NAME} (locomo)", n + 1, len(questions))
    # leave one conversation out: tune on four, report on the fifth, rotate; pool the held-out decisions
    pooled: dict[str, dict[str, list[bool]]] = {"ours": {"a": [], "t": []}, "naive": {"a": [], "t": []}}
    thresholds: dict[str, list[float]] = {"ours": [], "naive": []}
    for held in sorted(set(conv_of)):
        for side, values in scores.items():
            tune = [i for i, c in enumerate(conv_of) if c != held]
            th = best_threshold([values[i] for i in tune], [questions[i].absent for i in tune])
            thresholds[side].append(th)
            for i, c in enumerate(conv_of):
                if c == held:
                    v = values[i]
                    pooled[side]["a"].append(v is None or v < th)
                    pooled[side]["t"].append(questions[i].absent)
    out = {}
    for side in scores:
        p, r = pr(pooled[side]["a"], pooled[side]["t"])
        out[side] = {
            "threshold": sum(thresholds[side]) / len(thresholds[side]),
            "precision": p,
            "recall": r,
            "questions": len(pooled[side]["a"]),
        }
    return out, len(questions), sum(q.absent for q in questions)


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    gen, n_gen, why = run_generated(ctx, seed)
    lme, n_lme = run_longmemeval(ctx, longmemeval_sample(seed + 1, ctx.size("abstention.lme", 12, 100)))
    data = f"generated members (seed {seed}, {n_gen} questions)"
    metrics = [
        Metric(
            "precision of 'nothing relevant' (generated; held-out half)",
            gen["ours"]["precision"],
            gen["naive"]["precision"],
            unit="score",
            short="precision (generated)",
        ),
        Metric(
            "out-of-reach questions (another scope, forgotten, learned later) served their answer",
            rate(why["out_of_reach_answers_served_ours"], why["out_of_reach_questions"]),
            rate(why["out_of_reach_answers_served_naive"], why["out_of_reach_questions"]),
            (Gate("ours", "==", 0),),
            short="out-of-reach answers served",
        ),
        Metric(
            "F1 of 'nothing relevant' (generated; held-out half): ours minus naive",
            f1(gen["ours"]) - f1(gen["naive"]),
            gates=(Gate("ours", ">", 0),),
            unit="score",
        ),
        Metric(
            "recall of 'nothing relevant' (generated; held-out half)",
            gen["ours"]["recall"],
            gen["naive"]["recall"],
            unit="score",
            short="recall (generated)",
            note=f"thresholds chosen on the tuning half: ours hit.score < {gen['ours']['threshold']:.3f}, naive "
            f"cosine < {gen['naive']['threshold']:.3f}; question kinds "
            + ", ".join(f"{k} {v}" for k, v in why.items() if not k.startswith("out_of_reach")),
        ),
        Metric(
            "precision of 'nothing relevant' (LongMemEval-format _abs, generated)",
            lme["ours"]["precision"],
            lme["naive"]["precision"],
            unit="score",
            data=f"generated LongMemEval-format sample (seed {seed + 1}, {n_lme} questions)",
            short="precision (LongMemEval _abs)",
        ),
        Metric(
            "recall of 'nothing relevant' (LongMemEval-format _abs, generated)",
            lme["ours"]["recall"],
            lme["naive"]["recall"],
            unit="score",
            data=f"generated LongMemEval-format sample (seed {seed + 1}, {n_lme} questions)",
            short="recall (LongMemEval _abs)",
            note=f"thresholds: ours < {lme['ours']['threshold']:.3f}, naive < {lme['naive']['threshold']:.3f}",
        ),
    ]
    details: dict[str, Any] = {"generated": gen, "longmemeval_format": lme}
    if ctx.data is not None and (loco := run_locomo(ctx, ctx.data)) is not None:
        res, n, absent = loco
        label = f"LoCoMo dev ({ctx.data}; {n} questions, {absent} category 5; leave-one-conversation-out)"
        metrics += [
            Metric(
                "precision of 'nothing relevant' (LoCoMo category 5)",
                res["ours"]["precision"],
                res["naive"]["precision"],
                unit="score",
                data=label,
                short="precision (LoCoMo cat 5)",
            ),
            Metric(
                "recall of 'nothing relevant' (LoCoMo category 5)",
                res["ours"]["recall"],
                res["naive"]["recall"],
                unit="score",
                data=label,
                short="recall (LoCoMo cat 5)",
                note=f"mean thresholds over the five folds: ours < {res['ours']['threshold']:.3f}, naive < "
                f"{res['naive']['threshold']:.3f}",
            ),
        ]
        details["locomo"] = res
    return EvalResult(NAME, data, metrics, details)
