"""Provenance: every served item carries its source and evidence a person can open (seeds 002, 003).

Generated on-call memory: incidents summarised as episodes (evidence: the incident
link), facts about services from the CMDB (evidence: the CMDB record), runbook pages as
references (the page itself is the citation). The summariser sometimes loses the link
(one episode in six arrives without evidence): the store refuses those at the write
path; the naive memory stores whatever it is given. Every question is asked through
``recall`` and ``context`` (the prompt block an agent cites from) and of the naive
memory. Scored: the share of served items with a source and evidence, and the citation
rate — served items whose evidence is one a person can open (the incident, CMDB record
or page exists in the generated systems of record).
"""

from __future__ import annotations

import random
import re
from datetime import timedelta

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, naive_item, rate

NAME = "provenance"
SCOPE = ml.Scope("acme", "platform")
ONCALL = ml.Principal("oncall-summariser", SCOPE, role="curator")
ASKER = ml.Principal("sre-bot", ml.Scope("acme", "platform", "sre", "sre-bot"), role="agent")
SERVICES = ("checkout", "payments", "search", "auth", "inventory", "notifications")
SYMPTOMS = (
    "p99 latency spike after deploy",
    "error rate above 5% on the canary",
    "queue backlog growing",
    "TLS handshake failures from the edge",
    "memory leak in the worker pool",
    "cache hit rate collapsed",
)
ACTIONS = (
    "rolled back the release",
    "scaled the worker pool",
    "rotated the certificate",
    "flushed the cache",
    "raised the connection pool limit",
    "disabled the feature flag",
)


def generate(seed: int, incidents: int) -> tuple[list[Event], set[str], list[tuple[str, str]]]:
    """Memory writes, the evidence a person can open, and the questions (text, service)."""
    rng = random.Random(seed)
    events: list[Event] = []
    openable: set[str] = set()
    questions: list[tuple[str, str]] = []
    for n, service in enumerate(SERVICES):
        cmdb = f"cmdb://services/{service}"
        openable.add(cmdb)
        events.append(
            Event(
                day(0) + timedelta(minutes=n),
                ONCALL,
                ml.Fact(
                    f"service:{service}",
                    "owner",
                    f"{service} is owned by team {rng.choice('ABCDEFG')}",
                    day(0),
                    source="cmdb-sync@v2",
                    evidence=cmdb,
                ),
                label=f"{service}-owner",
            )
        )
        page = f"https://runbooks.example/{service}"
        openable.add(page)
        events.append(
            Event(
                day(0) + timedelta(minutes=n + 10),
                ONCALL,
                ml.Reference(
                    page,
                    f"{service} runbook",
                    f"When {service} misbehaves: check the dashboards, then {rng.choice(ACTIONS)}.",
                    day(0),
                    source="wiki@v1",
                    evidence=page,
                ),
                label=f"{service}-runbook",
            )
        )
    for i in range(incidents):
        service = rng.choice(SERVICES)
        symptom = rng.choice(SYMPTOMS)
        at = day(1 + i * 0.5)
        link = f"https://incidents.example/INC-{i:04d}"
        lost = rng.random() < 1 / 6  # the summariser dropped the link
        if not lost:
            openable.add(link)
        events.append(
            Event(
                at,
                ONCALL,
                ml.Episode(
                    service,
                    "prod",
                    f"{symptom} on {service}",
                    rng.choice(ACTIONS),
                    rng.choice(("fixed", "failed")),
                    at,
                    evidence=None if lost else link,
                    source="oncall-summariser@v3",
                    subject=f"service:{service}",
                ),
                label=f"INC-{i:04d}",
            )
        )
        questions.append((f"{symptom} on {service}: what did we try and who owns it", service))
    return events, openable, questions


_META = re.compile(r"\[([^\[\]]*)\]$")


def cited_evidence(line: str) -> str | None:
    """The evidence a context line cites: the ``evidence …`` part of its closing ``[…]``,
    wherever it stands there (a cut line ends ``; cut]``).

    >>> cited_evidence("- rolled back v2.3 [episode; valid 2026-01-02; source pd; evidence pd:INC-7]")
    'pd:INC-7'
    >>> cited_evidence("- rolled back … [episode; valid 2026-01-02; source pd; evidence pd:INC-7; cut]")
    'pd:INC-7'
    >>> cited_evidence("- rolled back v2.3 [episode; source pd]") is None
    True
    """
    found = _META.search(line)
    parts = found.group(1).split("; ") if found else []
    return next((p.removeprefix("evidence ") for p in parts if p.startswith("evidence ")), None)


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    incidents = ctx.size("provenance.incidents", 20, 150)
    events, openable, questions = generate(seed, incidents)
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    refused = 0
    for event in sorted(events, key=lambda e: e.at):  # one at a time: a refused record must not sink its batch
        clock.set(event.at)
        naive_rid = f"naive-{event.label}"
        try:
            res = store.write(event.record, by=event.by)
            naive_rid = res.record_id
        except ml.ValidationError:
            refused += 1
        naive.add([naive_item(event.record, naive_rid, event.by.scope, event.at, event.label)])
    clock.set(day(1 + incidents))

    items = {"ours": 0, "naive": 0}
    carrying = {"ours": 0, "naive": 0}
    cited = {"ours": 0, "naive": 0}
    lines = lines_openable = 0
    for n, (question, _service) in enumerate(questions):
        hits = store.recall(question, by=ASKER, k=6)
        for h in hits:
            items["ours"] += 1
            carrying["ours"] += bool(h.record.source) and bool(h.record.evidence)
            cited["ours"] += h.record.evidence in openable
        for nh in naive.search(question, org="acme", k=6):
            items["naive"] += 1
            carrying["naive"] += bool(nh.item.source) and bool(nh.item.evidence)
            cited["naive"] += nh.item.evidence in openable
        block = store.context(question, by=ASKER, budget_tokens=400, k=6)
        for line in block.splitlines()[1:]:
            lines += 1
            lines_openable += cited_evidence(line) in openable
        ctx.tick(NAME, n + 1, len(questions))
    metrics = [
        Metric(
            "served items carrying source and evidence",
            rate(carrying["ours"], items["ours"]),
            rate(carrying["naive"], items["naive"]),
            (Gate("ours", "==", 1),),
            short="source + evidence",
        ),
        Metric(
            "citation rate: served items whose evidence a person can open",
            rate(cited["ours"], items["ours"]),
            rate(cited["naive"], items["naive"]),
            (Gate("ours", "==", 1),),
            short="citation rate",
        ),
        Metric(
            "context lines (the prompt block) citing evidence a person can open",
            rate(lines_openable, lines),
            gates=(Gate("ours", "==", 1),),
            short="context lines cited",
        ),
        Metric(
            "writes without evidence stored (of those the summariser sent)",
            0.0 if refused else None,
            1.0 if refused else None,
            short="evidence-less writes stored",
            note=f"{refused} episode(s) arrived without evidence: the store refused them, naive kept them",
        ),
    ]
    details = {
        "questions": len(questions),
        "served_items": items,
        "context_lines": lines,
        "episodes_without_evidence": refused,
    }
    return EvalResult(NAME, f"generated on-call memory (seed {seed}, {incidents} incidents)", metrics, details)
