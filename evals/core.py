"""What every eval of the suite shares: metrics with numeric gates, the run context, ingestion.

An eval is a function ``run(ctx) -> EvalResult``. It generates its dataset (or reads
the one the context points at), asks the same questions of two memories — this store
through its public API (``ctx.open_store``) and the naive baseline
(`evals.naive.NaiveMemory`) — and returns metrics. A metric holds the number for each
memory and the gates it must pass, each a comparison with a number
(``Gate("ours", "==", 0)``). The suite fails when any gate fails.

``ctx.wrap`` is applied to every store an eval opens: the suite passes the identity,
the tests pass deliberately broken stores (`evals.broken`) to prove each eval can fail.
"""

from __future__ import annotations

import operator
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import memory_lakehouse as ml

from .naive import NaiveItem, NaiveMemory

UTC = timezone.utc  # noqa: UP017 - one name for the evals, as in scripts/_scenario.py
ROOT = Path(__file__).resolve().parent.parent

#: Generator seeds of the suite's datasets. No test uses these: tests pass their own seeds.
SEEDS: dict[str, int] = {
    "temporal": 150_001,
    "knowledge_update": 150_002,
    "provenance": 150_003,
    "forgetting": 150_004,
    "scope": 150_005,
    "abstention": 150_006,
    "contradiction": 150_007,
    "skew": 150_008,
    "policy": 150_009,
    "retrieval_lme": 150_010,
}

_OPS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


@dataclass(frozen=True)
class Gate:
    """A numeric gate on one side of a metric: ``Gate("ours", "==", 0)``; ``"naive"`` gates the baseline."""

    side: str
    op: str
    value: float

    def check(self, metric: Metric) -> bool:
        got = metric.ours if self.side == "ours" else metric.naive
        return got is not None and _OPS[self.op](got, self.value)

    def __str__(self) -> str:
        return f"{self.side} {self.op} {self.value:g}"


@dataclass
class Metric:
    """One measured number for this store (``ours``) and the naive baseline, with its gates."""

    name: str
    ours: float | None
    naive: float | None = None
    gates: tuple[Gate, ...] = ()
    unit: str = "rate"  # rate (0..1, plotted) | count | score (0..1, plotted)
    data: str = ""
    note: str = ""
    short: str = ""  # the plot's label

    @property
    def passed(self) -> bool | None:
        if not self.gates:
            return None
        return all(g.check(self) for g in self.gates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ours": self.ours,
            "naive": self.naive,
            "unit": self.unit,
            "gates": [str(g) for g in self.gates],
            "passed": self.passed,
            "data": self.data,
            "note": self.note,
            "short": self.short,
        }


@dataclass
class EvalResult:
    """What one eval measured, on which data."""

    name: str
    data: str
    metrics: list[Metric]
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        for m in self.metrics:
            m.data = m.data or self.data

    @property
    def passed(self) -> bool:
        return all(m.passed is not False for m in self.metrics)

    def failures(self) -> list[str]:
        return [
            f"{self.name}: {m.name}: ours={fmt(m.ours, m.unit)} naive={fmt(m.naive, m.unit)} fails "
            + " and ".join(str(g) for g in m.gates if not g.check(m))
            for m in self.metrics
            if m.passed is False
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "data": self.data,
            "passed": self.passed,
            "seconds": round(self.seconds, 2),
            "metrics": [m.to_dict() for m in self.metrics],
            "details": self.details,
        }


def fmt(value: float | None, unit: str = "rate") -> str:
    if value is None:
        return "—"
    if unit in ("rate", "score"):
        return f"{value:.1%}"
    return f"{value:g}"


def rate(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def commit_label(root: Path = ROOT) -> str:
    """The checkout's commit (with ``+dirty`` when the tree has changes), or "unknown"."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else (head or "unknown")


class SimClock:
    """The store's clock in an eval: histories over months run in seconds; never goes backwards."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: datetime) -> None:
        self.now = max(self.now, when)


def identity(store: Any) -> Any:
    return store


@dataclass
class Context:
    """How an eval runs: quick or full, on which data, with which embedder and store wrapper."""

    quick: bool = True
    data: Path | None = None
    embedder: Any = None
    wrap: Callable[[Any], Any] = identity
    workdir: Path | None = None
    seeds: dict[str, int] = field(default_factory=lambda: dict(SEEDS))
    progress: Callable[[str, int, int], None] | None = None
    sizes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.embedder is None:
            self.embedder = ml.HashingEmbedder(dim=384) if self.quick else ml.MiniLMEmbedder()
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="memlake-eval-")
            self.workdir = Path(self._tmp.name)
        self._opened: list[Any] = []

    def size(self, name: str, quick: int, full: int) -> int:
        """A dataset size: the test's override, else the quick or the full one."""
        return self.sizes.get(name, quick if self.quick else full)

    def seed(self, name: str) -> int:
        return self.seeds[name]

    def path(self, name: str) -> Path:
        assert self.workdir is not None
        n = len(list(self.workdir.glob(f"{name}*")))
        return self.workdir / f"{name}-{n}"

    def open_store(self, name: str, clock: Callable[[], datetime], **kwargs: Any) -> Any:
        """A fresh store for one eval (through ``wrap``), with the context's embedder."""
        store = ml.open(str(self.path(name)), clock=clock, embedder=self.embedder, **kwargs)
        self._opened.append(store)
        return self.wrap(store)

    def reopen(self, path: Path, clock: Callable[[], datetime], **kwargs: Any) -> Any:
        """Open an existing store again (a restored backup, a second process), through ``wrap``."""
        store = ml.open(str(path), clock=clock, embedder=self.embedder, create=False, **kwargs)
        self._opened.append(store)
        return self.wrap(store)

    def naive(self) -> NaiveMemory:
        return NaiveMemory(self.embedder)

    def tick(self, label: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(label, done, total)

    def close(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()


# ---------------------------------------------------------------- the same records into both memories


@dataclass(frozen=True)
class Event:
    """One write in a generated history: at system time *at*, *by* writes *record* (at *scope*)."""

    at: datetime
    by: ml.Principal
    record: ml.Envelope
    scope: ml.Scope | None = None
    label: str = ""


def text_of(record: ml.Envelope) -> str:
    """The naive memory's text of a record: its content fields, as a plain vector store would embed them."""
    if isinstance(record, (ml.Fact, ml.Preference)):
        return f"{record.subject} {record.attribute}: {record.value}"
    if isinstance(record, ml.Episode):
        return f"{record.service} {record.symptom} -> {record.action} ({record.outcome})"
    if isinstance(record, ml.Reference):
        return f"{record.title}: {record.content}"
    if isinstance(record, ml.Policy):
        return record.text
    return str(getattr(record, "value", ""))


def naive_item(
    record: ml.Envelope, record_id: str, scope: ml.Scope, ingested_at: datetime, label: str = ""
) -> NaiveItem:
    payload = {
        k: getattr(record, k)
        for k in ("attribute", "value", "service", "env", "action", "outcome", "symptom", "uri", "policy_id")
        if hasattr(record, k)
    }
    return NaiveItem(
        record_id=record_id,
        kind=record.kind,
        text=text_of(record),
        entity=record.subject_name,
        org=scope.org,
        scope=scope.path,
        source=record.source,
        evidence=record.evidence,
        event_time=record.valid_interval[0] or ingested_at,
        ingested_at=ingested_at,
        label=label,
        payload=payload,
    )


def ingest(
    events: Iterable[Event],
    store: Any,
    naive: NaiveMemory | None,
    clock: SimClock,
    *,
    on_write: Callable[[Event, Any], None] | None = None,
) -> dict[str, str]:
    """Write *events* in time order through the store's one write path (the clock at each event's
    time), and the same records into the naive memory; returns record ids by event label."""
    ids: dict[str, str] = {}
    batch: list[Event] = []

    def flush() -> None:
        if not batch:
            return
        clock.set(batch[0].at)
        by = batch[0].by
        result = store.write_many([e.record for e in batch], by=by, scope=batch[0].scope)
        for event, res in zip(batch, result, strict=True):
            if event.label:
                ids[event.label] = res.record_id
            if naive is not None:
                naive.add(
                    [naive_item(event.record, res.record_id, event.scope or event.by.scope, event.at, event.label)]
                )
            if on_write is not None:
                on_write(event, res)
        batch.clear()

    for event in sorted(events, key=lambda e: e.at):
        if batch and (event.at != batch[0].at or event.by != batch[0].by or event.scope != batch[0].scope):
            flush()
        batch.append(event)
    flush()
    return ids


def day(n: float, base: datetime = datetime(2026, 1, 5, 9, tzinfo=UTC)) -> datetime:
    return base + timedelta(days=n)


def hit_time(hit: Any) -> tuple[datetime | None, datetime | None]:
    """(known_since, valid_from) of a served store hit."""
    record = hit.record
    return record.known_since, record.valid_interval[0]


def leaked(times: Sequence[tuple[datetime | None, datetime | None]], decided_at: datetime) -> bool:
    """A decision leaked when it saw a row not known (or not yet valid) at its own time."""
    return any((k is not None and k > decided_at) or (v is not None and v > decided_at) for k, v in times)
