"""Forgetting: after ``forget`` nothing is served at any basis, after ``purge`` no byte is left,
and nothing brings it back (seeds 003, 004).

Generated customers hold memory of every kind (a fact in two versions, a preference, an
episode, a reference, a session note) and a summary derived from it about another
subject; each customer's values carry a canary string no file holds by chance. A backup
of the store is taken, then stewards forget some customers. Scored:

- items of a forgotten customer served by any read path (recall with and without the
  subject, as of before the forget and now, get_fact, episodes, context, replay);
- canary occurrences a byte scan finds under the store root and the ledger after
  ``purge`` (raw bytes of every file, and every parquet file decoded);
- resurrection attempts that succeed — a stale worker writing with the generation it
  read before the forget, a re-run of the original backfill, and a restore of the
  backup (opened with the same deletion ledger): an attempt succeeds when a forgotten
  customer's content is served again or its bytes are back on disk.

The naive memory forgets the way a plain vector store does, ``DELETE WHERE entity = ?``.
"""

from __future__ import annotations

import random
import shutil
import string
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, ingest, naive_item
from .naive import NaiveMemory

NAME = "forgetting"
ORG = ml.Scope("acme")
TEAM = ml.Scope("acme", "support")
CURATOR = ml.Principal("crm-sync", TEAM, role="curator")
MEMBER = ml.Principal("agent-ana", ml.Scope("acme", "support", "tier1", "ana"), role="member")
DPO = ml.Principal("dpo", ORG, role="steward")
WORKER = ml.Principal("summary-worker", TEAM, role="curator")


def canary(rng: random.Random) -> str:
    return "CANARY" + "".join(rng.choices(string.ascii_uppercase, k=14))


def customer_events(subject: str, can: str, t: datetime) -> list[Event]:
    """A customer's memory in every kind, and a summary derived from it about a segment."""
    ev = [
        Event(
            t,
            CURATOR,
            ml.Fact(
                subject,
                "delivery_note",
                f"{can} leave parcels at the blue door",
                t,
                source="crm-sync@v4",
                evidence=f"crm:{subject}/1",
            ),
            label=f"{subject}|fact1",
        ),
        Event(
            t + timedelta(days=1),
            CURATOR,
            ml.Fact(
                subject,
                "delivery_note",
                f"{can} leave parcels with the neighbour",
                t + timedelta(days=1),
                source="crm-sync@v4",
                evidence=f"crm:{subject}/2",
            ),
            label=f"{subject}|fact2",
        ),
        Event(
            t + timedelta(days=1, hours=1),
            CURATOR,
            ml.Preference(
                subject,
                "contact_channel",
                f"{can} sms only",
                t + timedelta(days=1),
                source="crm-sync@v4",
                evidence=f"crm:{subject}/3",
            ),
            label=f"{subject}|pref",
        ),
        Event(
            t + timedelta(days=1, hours=2),
            CURATOR,
            ml.Episode(
                "checkout",
                "prod",
                f"{can} refund stuck at checkout",
                "re-ran the refund job",
                "fixed",
                t + timedelta(days=1),
                subject=subject,
                evidence=f"https://tickets.example/{can}",
                source="support-log@v2",
            ),
            label=f"{subject}|episode",
        ),
        Event(
            t + timedelta(days=1, hours=3),
            CURATOR,
            ml.Reference(
                f"https://crm.example/{can}",
                "support ticket",
                f"{can} ticket body: parcel lost twice",
                t + timedelta(days=1),
                subject=subject,
                source="crm@v2",
            ),
            label=f"{subject}|reference",
        ),
        Event(
            t + timedelta(days=1, hours=4),
            MEMBER,
            ml.Note(
                f"sess-{can}", "scratch", f"{can} call back about the parcel", ttl=timedelta(days=365), subject=subject
            ),
            label=f"{subject}|note",
        ),
    ]
    return ev


def _mentions(text: str, canaries: Iterable[str]) -> bool:
    low = text.lower()
    return any(c.lower() in low for c in canaries)


def _record_text(record: Any) -> str:
    return " ".join(
        str(getattr(record, f, "") or "")
        for f in ("value", "content", "symptom", "action", "uri", "evidence", "subject", "key", "title")
    )


def served_by_store(store: Any, customers: dict[str, str], at_times: Sequence[datetime]) -> int:
    """Items mentioning a forgotten customer that any read path serves, at each basis."""
    cans = list(customers.values())
    count = 0
    kinds = ["fact", "preference", "episode", "reference", "note"]
    for subject, can in customers.items():
        bases: list[dict[str, Any]] = [{}] + [{"as_of": t} for t in at_times]
        for basis in bases:
            for h in store.recall(
                f"{can} parcel delivery refund sms", by=MEMBER, subject=subject, kinds=kinds, k=20, **basis
            ):
                count += _mentions(h.text + " " + _record_text(h.record), cans)
            for h in store.recall(
                f"{can} parcel delivery refund summary segment", by=MEMBER, kinds=kinds, k=30, **basis
            ):
                count += _mentions(h.text + " " + _record_text(h.record), cans)
            fact = store.get_fact(subject, "delivery_note", by=MEMBER, **basis)
            count += fact is not None and _mentions(_record_text(fact), cans)
            for e in store.episodes(service="checkout", env="prod", by=MEMBER, k=50, **basis):
                count += _mentions(_record_text(e), cans)
            block = store.context(f"{can} parcel refund", by=MEMBER, budget_tokens=2000, **basis)
            count += sum(_mentions(line, cans) for line in block.splitlines())
        for t in at_times:
            rep = store.replay([("probe", MEMBER, f"{can} parcel", subject, t)])
            count += sum(_mentions(str(x), cans) for x in rep.visible.column("search_text").to_pylist())
    return count


def served_by_naive(naive: NaiveMemory, customers: dict[str, str]) -> int:
    cans = list(customers.values())
    count = 0
    for subject, can in customers.items():
        count += sum(
            _mentions(h.item.text, cans) for h in naive.search(f"{can} parcel", org="acme", entity=subject, k=20)
        )
        count += sum(_mentions(h.item.text, cans) for h in naive.search(f"{can} parcel summary", org="acme", k=30))
    return count


def byte_scan(roots: Sequence[Path], needles: Iterable[str]) -> int:
    """Occurrences of the needles in every file under *roots*: raw bytes, and parquet decoded."""
    wanted = [n.lower() for n in needles]
    found = 0
    for root in roots:
        if not root.exists():
            continue
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            raw = file.read_bytes().decode("latin-1").lower()
            decoded = ""
            if file.suffix == ".parquet":
                try:
                    decoded = repr(pq.read_table(file).to_pylist()).lower()
                except Exception:
                    decoded = ""
            found += sum(raw.count(n) + decoded.count(n) for n in wanted)
    return found


def _attempt(fn: Callable[[], Any]) -> bool:
    """Run a resurrection attempt; False when the store refused it."""
    try:
        fn()
    except ml.LakehouseError:
        return False
    return True


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    rng = random.Random(seed)
    n_forget = ctx.size("forgetting.forgotten", 2, 10)
    n_keep = ctx.size("forgetting.kept", 2, 10)
    clock = SimClock(day(-1))
    ledger = ctx.path(f"{NAME}-ledger")
    store = ctx.open_store(NAME, clock, ledger_uri=str(ledger))
    root = Path(store.root)
    naive = ctx.naive()

    forgotten = {f"customer:f{n:03d}": canary(rng) for n in range(n_forget)}
    kept = {f"customer:k{n:03d}": canary(rng) for n in range(n_keep)}
    backfill: dict[str, list[Event]] = {}
    events: list[Event] = []
    for n, (subject, can) in enumerate({**forgotten, **kept}.items()):
        own = customer_events(subject, can, day(n * 0.25))
        backfill[subject] = own
        events += own
    ids = ingest(events, store, naive, clock)
    derived = [
        Event(
            day(30),
            WORKER,
            ml.Fact(
                f"segment:s{n % 3}",
                f"digest_{n}",
                f"digest of {subject}: {can} prefers sms",
                day(30),
                derived_from=(ids[f"{subject}|fact2"],),
                source="summariser@v3",
            ),
            label=f"{subject}|derived",
        )
        for n, (subject, can) in enumerate({**forgotten, **kept}.items())
    ]
    ingest(derived, store, naive, clock)
    before = day(31)
    clock.set(before + timedelta(hours=1))
    store.recall("parcel", by=MEMBER, k=5)  # builds the index, as serving would
    generations = {s: store.generation(s) for s in forgotten}
    backup = ctx.path(f"{NAME}-backup")
    shutil.copytree(root, backup)
    naive_backup = naive.snapshot()
    ctx.tick(NAME, 1, 6)

    clock.set(day(40))
    for subject in forgotten:
        store.forget(subject, by=DPO, reason="erasure request (GDPR art. 17)")
        naive.delete(subject)
    clock.set(day(41))
    served = served_by_store(store, forgotten, [before, day(40) - timedelta(minutes=1)])
    naive_served = served_by_naive(naive, forgotten)
    ctx.tick(NAME, 2, 6)

    store.purge(by=DPO)
    leftover = byte_scan([root, ledger], forgotten.values())
    naive_leftover = sum(naive.dump_text().lower().count(c.lower()) for c in forgotten.values())
    kept_ok = all(store.get_fact(s, "delivery_note", by=MEMBER) is not None for s in kept)
    ctx.tick(NAME, 3, 6)

    # resurrection attempts, each against every forgotten customer
    attempts = {"stale worker": 0, "re-run backfill": 0, "backup restore": 0}
    naive_attempts = dict.fromkeys(attempts, 0)
    clock.set(day(42))
    for subject, can in forgotten.items():
        record = ml.Fact(
            subject,
            "delivery_note",
            f"{can} late summary from a stale worker",
            day(39),
            source="summary-worker@v1",
            evidence=f"crm:{subject}/late",
        )
        _attempt(partial(store.write, record, by=WORKER, generation=generations[subject]))
        hit = served_by_store(store, {subject: can}, []) > 0
        attempts["stale worker"] += hit
        naive.add([naive_item(record, f"late-{subject}", WORKER.scope, day(42))])
        naive_attempts["stale worker"] += served_by_naive(naive, {subject: can}) > 0
    ctx.tick(NAME, 4, 6)
    clock.set(day(43))
    for subject, can in forgotten.items():
        _attempt(partial(ingest, backfill[subject], store, None, clock))
        back = served_by_store(store, {subject: can}, []) > 0 or byte_scan([root], [can]) > 0
        attempts["re-run backfill"] += back
        naive.add([naive_item(e.record, f"re-{e.label}", e.scope or e.by.scope, day(43)) for e in backfill[subject]])
        naive_attempts["re-run backfill"] += served_by_naive(naive, {subject: can}) > 0
    ctx.tick(NAME, 5, 6)

    store.close()
    shutil.rmtree(root)
    shutil.copytree(backup, root)
    clock.set(day(44))
    restored = ctx.reopen(root, clock, ledger_uri=str(ledger))
    for subject, can in forgotten.items():
        attempts["backup restore"] += served_by_store(restored, {subject: can}, [before]) > 0
        naive_attempts["backup restore"] += served_by_naive(naive_backup, {subject: can}) > 0
    restored.purge(by=DPO)
    after_restore = byte_scan([root, ledger], forgotten.values())
    ctx.tick(NAME, 6, 6)

    total = len(forgotten)
    metrics = [
        Metric(
            "items of forgotten customers served after forget, at any basis and read path",
            float(served),
            float(naive_served),
            (Gate("ours", "==", 0),),
            unit="count",
            short="served after forget",
        ),
        Metric(
            "canary occurrences a byte scan finds after purge",
            float(leftover),
            float(naive_leftover),
            (Gate("ours", "==", 0),),
            unit="count",
            short="bytes left after purge",
        ),
        Metric(
            "resurrection attempts that succeeded (stale worker, re-run backfill, backup restore)",
            float(sum(attempts.values())),
            float(sum(naive_attempts.values())),
            (Gate("ours", "==", 0),),
            unit="count",
            short="resurrections",
            note="; ".join(f"{k}: {v}/{total} ours, {naive_attempts[k]}/{total} naive" for k, v in attempts.items()),
        ),
        Metric(
            "canary occurrences after the restored backup was purged",
            float(after_restore),
            gates=(Gate("ours", "==", 0),),
            unit="count",
        ),
        Metric(
            "customers not forgotten still served",
            1.0 if kept_ok else 0.0,
            gates=(Gate("ours", "==", 1),),
            unit="score",
        ),
    ]
    details = {"forgotten": total, "kept": len(kept), "attempts": attempts, "naive_attempts": naive_attempts}
    return EvalResult(
        NAME, f"generated customers (seed {seed}, {total} forgotten of {total + len(kept)})", metrics, details
    )
