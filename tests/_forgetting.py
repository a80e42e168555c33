"""Helpers for the forgetting tests: a subject with canaries in every kind, read-path probes,
byte scans, and the entry points of spawned processes (they must be importable by name).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from _support import CURATOR, MEMBER, STEWARD, day, episode, fact, files_under, parquet_strings

import memory_lakehouse as ml

SUBJECT = "customer-728"
OTHER = "customer-99"
KINDS = ("fact", "preference", "episode", "reference", "policy", "note")
QUERIES = (
    "leave the parcel at the blue door",
    "refund stuck at checkout",
    "sms only contact",
    "ticket body",
    "scratch",
    "digest of one member",
    "plan number",
)


def canary() -> str:
    """A distinctive string no file holds by chance (letters only: no redaction pattern fires)."""
    return "CANARY" + "".join(random.choices(string.ascii_uppercase, k=14))


def open_store(path, clock=None, ledger=None, **kw) -> ml.MemoryStore:
    return ml.open(
        path, clock=clock, ledger_uri=None if ledger is None else str(ledger), embedder=ml.HashingEmbedder(), **kw
    )


def write_subject(store: ml.MemoryStore, clock, can: str, subject: str = SUBJECT) -> dict[str, str]:
    """The subject's memory in every kind (two fact versions), plus two generations of records
    derived from it about another subject. Returns record ids by name."""
    ids = {}
    ids["fact_v1"] = store.write(
        fact(subject, "shipping_note", f"{can} leave the parcel at the blue door", day(0)), by=CURATOR
    ).record_id
    clock.advance(days=1)
    ids["fact_v2"] = store.write(
        fact(subject, "shipping_note", f"{can} leave the parcel with the neighbour", day(1)), by=CURATOR
    ).record_id
    ids["preference"] = store.write(
        ml.Preference(subject, "contact_channel", f"{can} sms only contact", day(1), source="test@v1"), by=CURATOR
    ).record_id
    ids["episode"] = store.write(
        episode(
            "checkout",
            f"{can} refund stuck at checkout",
            "fixed",
            day(1),
            subject=subject,
            evidence=f"https://tracker.example/{can}",
        ),
        by=CURATOR,
    ).record_id
    ids["reference"] = store.write(
        ml.Reference(
            f"https://crm.example/{can}",
            "support ticket",
            f"{can} ticket body",
            day(1),
            source="crm@v2",
            subject=subject,
        ),
        by=CURATOR,
    ).record_id
    ids["note"] = store.write(
        ml.Note("sess-1", "scratch", f"{can} scratch", ttl=timedelta(days=365), subject=subject), by=MEMBER
    ).record_id
    clock.advance(days=1)
    ids["derived"] = store.write(
        fact(
            "segment:vip",
            "digest",
            f"digest of one member {can}-derived",
            day(2),
            derived_from=(ids["fact_v2"],),
            source="summariser@v3",
        ),
        by=CURATOR,
    ).record_id
    ids["derived2"] = store.write(
        fact(
            "segment:vip",
            "digest_of_digest",
            f"second digest {can}-derived-again",
            day(2),
            derived_from=(ids["derived"],),
            source="summariser@v3",
        ),
        by=CURATOR,
    ).record_id
    return ids


def write_mixed_world(store: ml.MemoryStore, clock, can: str) -> dict[str, str]:
    """`write_subject` and `write_others`, then one batch mixing both subjects in one file,
    a day later, and a recall that builds the index: what a purge must pick apart."""
    ids = write_subject(store, clock, can)
    write_others(store, clock)
    mixed = store.write_many(
        [fact(SUBJECT, "region", f"{can} lives in the north", day(3)), fact(OTHER, "region", "eu-west", day(3))],
        by=CURATOR,
    )
    ids["mixed"] = mixed[0].record_id
    clock.advance(days=1)
    assert store.recall("parcel refund", by=MEMBER, kinds=KINDS)  # builds the index (partition or cache)
    return ids


def write_others(store: ml.MemoryStore, clock, *, days: int = 3) -> None:
    """Another subject's history: a plan that changes every day, and an unrelated digest."""
    for n in range(days):
        store.write(fact(OTHER, "plan", f"plan number {n} for the other customer", day(n)), by=CURATOR)
        store.write(episode("checkout", f"timeout number {n} at checkout", "fixed", day(n)), by=CURATOR)
        clock.advance(hours=6)
    store.write(fact("segment:vip", "size", "twelve members", day(0)), by=CURATOR)


# ---------------------------------------------------------------- read-path probes


def _mentions(obj, subject: str, needles: Iterable[str]) -> bool:
    text = repr(obj)
    return subject in text or any(n in text for n in needles)


def leaks(
    store: ml.MemoryStore,
    *,
    subject: str,
    needles: Iterable[str],
    times: Iterable[datetime],
    reader: ml.Principal = MEMBER,
) -> list[str]:
    """Every way a read path served the subject (or a canary) at now and at each past time."""
    needles = tuple(needles)
    found: list[str] = []
    bases: list[dict[str, Any]] = [{}] + [{"as_of": t} for t in times] + [{"known_at": t} for t in times]
    for basis in bases:
        where = f"basis {basis or 'now'}"
        # k above the number of visible records: recall returns every one of them
        for hit in store.recall(" ".join(QUERIES), by=reader, kinds=KINDS, k=200, **basis):
            if _mentions((hit.record, hit.text), subject, needles):
                found.append(f"recall at {where}: {hit.record_id}")
        for hit in store.recall("anything", by=reader, subject=subject, kinds=KINDS, k=50, **basis):
            found.append(f"recall subject= at {where}: {hit.record_id}")
        for attribute, kind in (("shipping_note", "fact"), ("contact_channel", "preference")):
            if store.get_fact(subject, attribute, by=reader, kind=kind, **basis) is not None:
                found.append(f"get_fact {attribute} at {where}")
        for attribute in ("digest", "digest_of_digest"):
            if store.get_fact("segment:vip", attribute, by=reader, **basis) is not None:
                found.append(f"get_fact derived {attribute} at {where}")
        for e in store.episodes(service="checkout", env="prod", by=reader, k=50, **basis):
            if _mentions(e, subject, needles):
                found.append(f"episodes at {where}: {e.record_id}")
        text = store.context("parcel refund contact ticket digest", by=reader, budget_tokens=4000, kinds=KINDS, **basis)
        if _mentions(text, subject, needles):
            found.append(f"context at {where}")
    decisions = [(f"d{i}-{s}", reader, "", s, t) for i, t in enumerate(times) for s in (subject, None)]
    if decisions:
        rep = store.replay(decisions, kinds=KINDS)
        for row in rep.visible.select(["decision_id", "subject", "search_text"]).to_pylist():
            if _mentions((row["subject"], row["search_text"]), subject, needles):
                found.append(f"replay {row['decision_id']}")
    return found


def other_reads(store: ml.MemoryStore, times: Iterable[datetime], reader: ml.Principal = MEMBER) -> dict:
    """What everyone else's reads return at each time: compared before and after a purge."""
    out: dict[str, Any] = {}
    for t in times:
        plan = store.get_fact(OTHER, "plan", by=reader, as_of=t)
        out[f"plan@{t}"] = None if plan is None else (plan.record_id, plan.value, plan.known_since)
        out[f"valid@{t}"] = [
            getattr(store.get_fact(OTHER, "plan", by=reader, valid_at=v, known_at=t), "value", None)
            for v in (day(0), day(1), day(2))
        ]
        out[f"recall@{t}"] = sorted(
            h.record_id for h in store.recall("plan number checkout timeout", by=reader, kinds=KINDS, k=50, as_of=t)
        )
        out[f"episodes@{t}"] = [
            e.record_id for e in store.episodes(service="checkout", env="prod", by=reader, k=50, as_of=t)
        ]
    rep = store.replay([(f"d{i}", reader, "", None, t) for i, t in enumerate(times)], kinds=KINDS)
    out["replay"] = sorted(
        zip(rep.visible.column("decision_id").to_pylist(), rep.visible.column("record_id").to_pylist(), strict=True)
    )
    return out


# ---------------------------------------------------------------- byte scans


def files_holding(roots: Iterable, needles: Iterable[str]) -> dict[str, list[str]]:
    """needle -> files under *roots* holding it: in the raw bytes, or in a decoded parquet value."""
    needles = [n for n in needles]
    hits: dict[str, list[str]] = {}
    for root in roots:
        for path in files_under(root):
            data = path.read_bytes()
            decoded = "\n".join(parquet_strings(path)) if path.suffix == ".parquet" else ""
            for n in needles:
                if n.encode() in data or n in decoded:
                    hits.setdefault(n, []).append(str(path))
    return hits


def index_files(root) -> list[Path]:
    return files_under(Path(root) / "_index")


def index_ids(root) -> set[str]:
    return {rid for p in index_files(root) if p.name == "ids.json" for rid in json.loads(p.read_text())}


def index_holds_vector_of(root, texts: list[str], embedder=None) -> bool:
    """Whether any saved partition still holds the embedding of one of *texts*."""
    if not texts:
        return False
    embedder = embedder or ml.HashingEmbedder()
    wanted = embedder.embed(texts)
    for p in index_files(root):
        if p.name == "vectors.npy":
            vectors = np.load(p)
            if len(vectors) and float(np.max(vectors @ wanted.T)) > 0.9999:
                return True
        if p.name == "codes.npy":  # the int8 copy: rows rebuilt from codes and units, then made unit again
            rows = np.load(p).astype(np.float32) * np.load(p.with_name("scales.npy"))[:, None]
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            if len(rows) and float(np.max((rows / np.where(norms > 0, norms, 1.0)) @ wanted.T)) > 0.999:
                return True
    return False


# ---------------------------------------------------------------- spawned processes


def child_leaks(
    path: str, ledger: str, subject: str, needles: list[str], times: list[datetime], now: datetime
) -> list[str]:
    """Open the store in a fresh process and probe every read path."""
    store = open_store(path, clock=lambda: now, ledger=ledger)
    return leaks(store, subject=subject, needles=needles, times=times)


def child_reads_across_a_forget(
    path: str,
    ledger: str,
    subject: str,
    needles: list[str],
    times: list[datetime],
    now: datetime,
    opened,
    forgotten,
    out,
) -> None:
    """A long-lived reader: open and read, wait for the forget elsewhere, read again."""
    store = open_store(path, clock=lambda: now, ledger=ledger)
    before = leaks(store, subject=subject, needles=needles, times=times)
    opened.set()
    forgotten.wait(120)
    out.put((len(before), leaks(store, subject=subject, needles=needles, times=times)))


def child_purge(path: str, ledger: str, now: datetime, ready) -> None:
    """Run a purge (the parent kills this process somewhere inside it)."""
    store = open_store(path, clock=lambda: now, ledger=ledger)
    store.lake.refresh()
    ready.set()
    store.purge(by=STEWARD)


def steward_of(scope: ml.Scope, name: str = "dpo") -> ml.Principal:
    return ml.Principal(name, scope, role="steward")


def stored_row(store: ml.MemoryStore, kind: str, record_id: str) -> pa.Table:
    """The stored row of *record_id*, as the snapshot holds it (system-time columns included)."""
    rows = store.lake.all_rows(kind)
    return rows.filter(pc.equal(rows.column("record_id"), record_id))


def append_raw(store: ml.MemoryStore, row: pa.Table, *, record_id: str, own_txn: bool = False) -> None:
    """*row* appended again under a new id, straight to the table: no write path, no checks
    (an old backfill job re-run, another engine appending). The row keeps its transaction
    id, and so the system time of the commit that first wrote it, unless *own_txn*: then
    it is known from this append's commit."""
    from memory_lakehouse.lake import commit_metadata, new_txn_id

    txn_id = new_txn_id()
    raw = row.drop_columns(["known_since", "commit_version", "actor_key"])
    raw = raw.set_column(raw.schema.get_field_index("record_id"), "record_id", pa.array([record_id]))
    if own_txn:
        raw = raw.set_column(raw.schema.get_field_index("txn_id"), "txn_id", pa.array([txn_id]))
    meta = commit_metadata(
        txn_id=txn_id,
        committed_at=store.lake.clock.read(),
        op="write",
        actor="backfill",
        reason="rerun",
        writers=["backfill@v1"],
        kinds=["fact"],
        records=1,
    )
    store.lake.append({"fact": raw}, meta)
