"""Knowledge update: superseded or expired values must never be served as current (seeds 001, 004).

Generated users change plans (upgrades and downgrades), move house and change how they
want to be contacted; some contact preferences are older than their 30-day TTL, and some
trials have ended (``valid_to``). Every question asks for a slot's value *now* — the
current version, or nothing when it expired or ended — through both of the store's read
paths (``get_fact`` for the slot, ``recall`` for the free-text question) and the naive
memory (top-1 of the slot's rows, and its top-k for the question). A stale serve is a
superseded or expired value answered as current, or a superseded or expired row among
the items served for the question. Questions about the past (``valid_at`` a date) are
scored too: the store must answer what was true then.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, ingest, rate

NAME = "knowledge_update"
SCOPE = ml.Scope("acme", "accounts")
CRM = ml.Principal("crm-sync", SCOPE, role="curator")
ASKER = ml.Principal("assistant", ml.Scope("acme", "accounts", "helpdesk", "assistant"), role="agent")
PLANS = ("Free Starter", "Team Basic", "Team Pro", "Enterprise Pro", "Enterprise Plus")
CITIES = ("Lisbon", "Porto", "Madrid", "Lyon", "Berlin", "Gdansk", "Oslo", "Turin", "Leeds", "Ghent")
CHANNELS = ("email only", "sms only", "phone after 15:00", "chat during office hours", "no contact on weekends")
QUESTIONS = {
    "plan": "which subscription plan is {s} on",
    "city": "which city does {s} live in",
    "contact": "how does {s} want to be contacted",
    "trial": "is {s} on a trial of an add-on",
}
TTL = timedelta(days=30)


@dataclass(frozen=True)
class Version:
    label: str
    subject: str
    attribute: str
    kind: str
    value: str
    valid_from: datetime
    valid_to: datetime | None


def generate(seed: int, users: int, now: datetime) -> tuple[list[Event], list[Version]]:
    rng = random.Random(seed)
    events: list[Event] = []
    versions: list[Version] = []

    def add(
        subject: str, attribute: str, kind: str, value: str, valid_from: datetime, valid_to: datetime | None = None
    ) -> None:
        label = f"{subject}|{attribute}|{len(versions)}"
        versions.append(Version(label, subject, attribute, kind, value, valid_from, valid_to))
        lag = timedelta(minutes=rng.randrange(1, 600))
        if kind == "preference":
            record: ml.Envelope = ml.Preference(
                subject,
                attribute,
                value,
                valid_from,
                ttl=TTL,
                source="crm-sync@v4",
                evidence=f"crm:{subject}/{attribute}/{len(versions)}",
            )
        else:
            record = ml.Fact(
                subject,
                attribute,
                value,
                valid_from,
                valid_to=valid_to,
                source="crm-sync@v4",
                evidence=f"crm:{subject}/{attribute}/{len(versions)}",
            )
        events.append(Event(valid_from + lag, CRM, record, label=label))

    for u in range(users):
        subject = f"user:{u:04d}"
        t = day(rng.uniform(0, 20))
        for value in _walk(rng, PLANS, rng.randint(1, 4)):  # upgrades, sometimes a downgrade
            add(subject, "plan", "fact", f"{value} plan", t)
            t += timedelta(days=rng.uniform(5, 40))
        t = day(rng.uniform(0, 30))
        for value in _walk(rng, CITIES, rng.randint(1, 3)):
            add(subject, "city", "fact", f"lives in {value}", t)
            t += timedelta(days=rng.uniform(20, 60))
        t = now - timedelta(days=rng.uniform(40, 120))  # the last may be older than the TTL: then it expired
        for value in _walk(rng, CHANNELS, rng.randint(1, 3)):
            add(subject, "contact", "preference", value, t)
            t += timedelta(days=rng.uniform(3, 25))
        if rng.random() < 0.4:
            start = now - timedelta(days=rng.uniform(20, 60))
            add(
                subject,
                "trial",
                "fact",
                "trial of the analytics add-on",
                start,
                start + timedelta(days=14) if rng.random() < 0.6 else None,
            )
    return events, versions


def _walk(rng: random.Random, values: tuple[str, ...], n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        v = rng.choice(values)
        if not out or v != out[-1]:
            out.append(v)
    return out


def current(versions: list[Version], at: datetime) -> dict[tuple[str, str], Version | None]:
    """Per slot, the version true at *at* (None when it expired or ended)."""
    out: dict[tuple[str, str], Version | None] = {}
    for version in sorted(versions, key=lambda v: v.valid_from):
        if version.valid_from <= at:
            out[(version.subject, version.attribute)] = version
    for slot, v in list(out.items()):
        if v is not None and (
            (v.kind == "preference" and v.valid_from + TTL <= at) or (v.valid_to is not None and v.valid_to <= at)
        ):
            out[slot] = None
    return out


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    users = ctx.size("knowledge_update.users", 12, 120)
    now = day(200)
    events, versions = generate(seed, users, now)
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    ids = ingest(events, store, naive, clock)
    clock.set(now)
    by_id = {ids[v.label]: v for v in versions}
    truth = current(versions, now)
    kind_of = {"contact": "preference"}

    slots = sorted(truth)
    answers = {"ours": 0, "naive": 0}
    stale = {"ours": 0, "naive": 0}
    served = {"ours": 0, "naive": 0}
    stale_items = {"ours": 0, "naive": 0}
    for n, (subject, attribute) in enumerate(slots):
        want = truth[(subject, attribute)]
        want_id = ids[want.label] if want else None
        kind = kind_of.get(attribute, "fact")
        got = store.get_fact(subject, attribute, by=ASKER, kind=kind)
        answers["ours"] += (got.record_id if got else None) == want_id
        stale["ours"] += got is not None and got.record_id != want_id
        rows = naive.search(
            QUESTIONS[attribute].format(s=subject),
            org="acme",
            entity=subject,
            kinds=[kind],
            where={"attribute": attribute},
            k=1,
        )
        top = rows[0].item.record_id if rows else None
        answers["naive"] += top == want_id
        stale["naive"] += top is not None and top != want_id
        question = QUESTIONS[attribute].format(s=subject)
        hits = [
            h
            for h in store.recall(question, by=ASKER, subject=subject, kinds=[kind], k=5)
            if h.record_id in by_id and by_id[h.record_id].attribute == attribute
        ]
        nhits = [
            h
            for h in naive.search(question, org="acme", entity=subject, kinds=[kind], k=5)
            if h.item.record_id in by_id and by_id[h.item.record_id].attribute == attribute
        ]
        for side, got_ids in (("ours", [h.record_id for h in hits]), ("naive", [h.item.record_id for h in nhits])):
            served[side] += len(got_ids)
            stale_items[side] += sum(1 for rid in got_ids if rid != want_id)
        ctx.tick(NAME, n + 1, len(slots) * 2)

    # questions about the past: what was true on a date, asked now
    rng = random.Random(seed + 1)
    past = [
        (subject, attribute, now - timedelta(days=rng.uniform(10, 150)))
        for subject, attribute in slots
        if attribute in ("plan", "city")
    ]
    right_then = 0
    for n, (subject, attribute, when) in enumerate(past):
        want = current(versions, when).get((subject, attribute))
        got = store.get_fact(subject, attribute, by=ASKER, valid_at=when)
        right_then += (got.record_id if got else None) == (ids[want.label] if want else None)
        ctx.tick(NAME, len(slots) + (n + 1) * len(slots) // max(1, len(past)), len(slots) * 2)

    total = len(slots)
    metrics = [
        Metric(
            "stale-serve rate: slot questions answered with a superseded or expired value",
            rate(stale["ours"], total),
            rate(stale["naive"], total),
            (Gate("ours", "==", 0),),
            short="stale serves (slot)",
        ),
        Metric(
            "stale items among what recall served for the question",
            rate(stale_items["ours"], served["ours"]),
            rate(stale_items["naive"], served["naive"]),
            (Gate("ours", "==", 0),),
            short="stale items (recall)",
        ),
        Metric(
            "slot questions answered with the current value (or nothing when it expired)",
            rate(answers["ours"], total),
            rate(answers["naive"], total),
            (Gate("ours", "==", 1),),
            unit="score",
            short="current value answered",
        ),
        Metric(
            "questions about the past (valid_at a date) answered with what was true then",
            rate(right_then, len(past)),
            gates=(Gate("ours", "==", 1),),
            unit="score",
        ),
    ]
    expired = sum(1 for v in truth.values() if v is None)
    details: dict[str, Any] = {
        "users": users,
        "slots": total,
        "versions": len(versions),
        "slots_expired_or_ended_now": expired,
        "past_questions": len(past),
        "served_items": served,
    }
    return EvalResult(NAME, f"generated account histories (seed {seed}, {total} slots)", metrics, details)
