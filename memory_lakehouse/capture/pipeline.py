"""Capture: store a session's turns, then extract and reconcile — inline or on a worker.

``store.capture(session_id, messages, by=p)`` writes the turns at once (the request
path) and describes the rest as an `ExtractionTask`: the turns' ids and the deletion
generation of every subject they touch, read *before* the turns were written. Running
the task (`run_task`, inline or on a worker) reads the turns back, extracts, and writes
through the one write path with those generations, so a subject forgotten meanwhile
makes the write raise `StaleGeneration` and the result is dropped, never written.

Reconcile (seed 001), per extracted record:

* **novel** — inserted;
* **conflict** (a `Fact`/`Preference` slot holding another value) — the new version
  supersedes the old, with the pointer and a reason;
* **duplicate** — no new version: a `Sighting` of the record in force is appended
  instead (one per record and turn, so re-running a capture adds nothing). Its
  seen-count and last-seen are read back at the read's basis by `seen`.

Who writes what: an agent's capture is proposals only (turns and extracted records:
nothing is recalled until a curator approves); other roles write as their role allows
at the target scope, and a principal who may not gets `PermissionDenied` before
anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from ..conversation import Sighting, Turn
from ..errors import StaleGeneration, ValidationError
from ..records import Envelope, Preference, kind_of_record_id, record_from_row, subject_key
from ..scope import Principal, Scope
from ..write import BatchResult, WriteResult
from .extract import Extractor, RuleExtractor

if TYPE_CHECKING:
    from ..store import MemoryStore


@dataclass(frozen=True)
class ExtractionTask:
    """What a worker needs to extract a captured session: ids and generations, no content.

    Serialisable (`to_dict` / `from_dict`), so it can travel through a real queue.
    """

    session_id: str
    turn_ids: tuple[str, ...]
    generations: Mapping[str, int]  # subject key -> deletion generation when the capture began
    subject: str | None = None
    scope: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "turn_ids": list(self.turn_ids),
            "generations": dict(self.generations),
            "subject": self.subject,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtractionTask:
        return cls(
            str(data["session_id"]),
            tuple(data["turn_ids"]),
            {str(k): int(v) for k, v in dict(data["generations"]).items()},
            data.get("subject"),
            data.get("scope"),
        )


@dataclass(frozen=True)
class CaptureResult:
    """What extraction wrote: ``status`` is ``"dropped"`` when a subject was forgotten meanwhile."""

    status: Literal["written", "dropped"]
    results: tuple[WriteResult, ...] = ()
    sightings: int = 0
    reason: str | None = None

    def count(self, action: str) -> int:
        return sum(1 for r in self.results if r.action == action)


@dataclass
class CaptureJob:
    """A capture: its turns are stored; its extraction is done, or running on a worker."""

    session_id: str
    turns: BatchResult
    task: ExtractionTask
    _future: Any = field(default=None, repr=False)
    _result: CaptureResult | None = None

    def done(self) -> bool:
        return self._result is not None or (self._future is not None and self._future.done())

    def result(self, timeout: float | None = None) -> CaptureResult:
        """Wait for the extraction (inline captures are done already)."""
        if self._result is None:
            self._result = self._future.result(timeout=timeout)
        assert self._result is not None
        return self._result


def _turns(session_id: str, messages: Sequence[Any], *, start: int, now: datetime, subject: str | None) -> list[Turn]:
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        if isinstance(m, Turn):
            turns.append(m if subject is None or m.subject else m.replace(subject=subject))
            continue
        if not isinstance(m, Mapping):
            raise ValidationError(f"message {i}: a Turn or a mapping with role and text", field="messages")
        text = m.get("text", m.get("content"))
        turns.append(
            Turn(
                session_id,
                m.get("role", "user"),
                text,
                m.get("said_at") or now,
                speaker=m.get("speaker"),
                position=int(m.get("position", start + i)),
                subject=m.get("subject") or subject,
                source=m.get("source") or "conversation",
            )
        )
    return turns


def _turn(row: Mapping[str, Any]) -> Turn:
    turn = record_from_row("turn", row)
    assert isinstance(turn, Turn)
    return turn


def _next_position(store: MemoryStore, session_id: str) -> int:
    import pyarrow.compute as pc

    store.lake.refresh(kinds=["turn"])
    rows = store.lake.known_rows("turn").select(["session_id", "position"])
    mine = rows.filter(pc.equal(rows.column("session_id"), session_id))
    top = pc.max(mine.column("position")).as_py() if mine.num_rows else None
    return 0 if top is None else int(top) + 1


def capture(
    store: MemoryStore,
    session_id: str,
    messages: Sequence[Any],
    *,
    by: Principal,
    subject: str | None = None,
    scope: Scope | None = None,
    extractor: Extractor | None = None,
    worker: Any = None,
) -> CaptureJob:
    """Store the turns, then extract and reconcile (inline, or on *worker*; see the module docstring)."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValidationError("session_id must be a non-empty string", field="session_id")
    if isinstance(messages, (str, Mapping)) or not messages:
        raise ValidationError("messages must be a non-empty list of turns", field="messages")
    start = (
        _next_position(store, session_id)
        if any(not isinstance(m, Turn) and (not isinstance(m, Mapping) or "position" not in m) for m in messages)
        else 0
    )
    turns = _turns(session_id, messages, start=start, now=store.clock.peek(), subject=subject)
    keys = {subject_key(t.subject_name) for t in turns} | ({subject_key(subject)} if subject else set())
    store._sync_ledger()
    generations = dict(store.ledger.generations(keys))  # before the turns exist: a forget from here on is seen
    generations = {k: generations.get(k, 0) for k in keys}
    status = "proposed" if by.role == "agent" else "active"
    written = store._committed(
        lambda: store.writer.commit(
            turns,
            by,
            scope=scope,
            status=status,
            op="propose" if status == "proposed" else "write",
            reason="conversation capture",
            generation=generations,
        )
    )
    task = ExtractionTask(
        session_id, tuple(r.record_id for r in written), generations, subject, scope.path if scope is not None else None
    )
    job = CaptureJob(session_id, written, task)
    if worker is None:
        job._result = run_task(store, task, by=by, extractor=extractor)
    else:
        job._future = worker.submit(store, task, by, extractor)
    return job


def run_task(
    store: MemoryStore, task: ExtractionTask, *, by: Principal, extractor: Extractor | None = None
) -> CaptureResult:
    """Extract one captured session and reconcile what it yields; drop it all if a subject was forgotten."""
    extractor = extractor or RuleExtractor()
    rows = {r["record_id"]: r for r in store.vis.by_ids("turn", list(task.turn_ids)).to_pylist()}
    if len(rows) < len(set(task.turn_ids)):
        return CaptureResult("dropped", reason="a turn of the session was forgotten before extraction")
    turns = sorted((_turn(rows[t]) for t in set(task.turn_ids)), key=lambda t: t.position)
    candidates = list(extractor.extract(turns, subject=task.subject))
    return write_extracted(store, task, candidates, turns, by=by, source=extractor.name)


def write_extracted(
    store: MemoryStore,
    task: ExtractionTask,
    candidates: Sequence[Envelope],
    turns: Sequence[Turn],
    *,
    by: Principal,
    source: str,
) -> CaptureResult:
    """Reconcile and write an extractor's records: one commit, then one of sightings for duplicates."""
    ids = {t.record_id: t for t in turns}
    for c in candidates:
        if not c.derived_from or not set(c.derived_from) <= set(ids):
            raise ValidationError(
                f"extractor {source} returned a {c.kind} not derived_from the session's turns "
                "(forgetting could not reach it)",
                field="derived_from",
            )
    if not candidates:
        return CaptureResult("written")
    scope = Scope.parse(task.scope) if task.scope else None
    status = "proposed" if by.role == "agent" else "active"
    generations = dict(task.generations)
    for c in candidates:  # a subject the extractor names: its generation as of now (the turns' still guard it)
        generations.setdefault(subject_key(c.subject_name), store.generation(c.subject_name))
    try:
        result = store._committed(
            lambda: store.writer.commit(
                list(candidates),
                by,
                scope=scope,
                status=status,
                generation=generations,
                op="propose" if status == "proposed" else "write",
                reason=f"extracted from a conversation by {source}",
            )
        )
        sightings = [  # a restated preference lives on: its sighting carries the refreshed expiry
            Sighting(
                turn.said_at,
                subject=c.subject_name,
                derived_from=(r.record_id, turn.record_id),
                source=c.source or f"extractor:{source}",
                scope=r.scope,
                expires_at=turn.said_at + c.ttl if isinstance(c, Preference) and c.ttl else None,
            )
            for c, r in zip(candidates, result, strict=True)
            if r.action == "duplicate"
            for turn in [ids[c.derived_from[0]]]
            if turn.record_id is not None
        ]
        seen = (
            store._committed(
                lambda: store.writer.commit(
                    sightings, by, generation=generations, reason="seen again in a conversation"
                )
            )
            if sightings
            else None
        )
    except StaleGeneration as exc:
        return CaptureResult("dropped", reason=str(exc))
    return CaptureResult("written", tuple(result), 0 if seen is None else len(seen) - seen.count("duplicate"))


@dataclass(frozen=True)
class Seen:
    """How often a record was stated, and when first and last (world time), at a basis."""

    record_id: str
    count: int
    first_seen: datetime | None
    last_seen: datetime | None


def seen(
    store: MemoryStore,
    record_id: str,
    *,
    by: Principal,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    valid_at: datetime | None = None,
) -> Seen:
    """The seen-count and last-seen of a record: itself plus its sightings visible at the basis."""
    kind = kind_of_record_id(record_id)
    rows = store.vis.by_ids(kind, [record_id]).to_pylist()
    basis = store._basis(as_of, known_at, valid_at)
    if not rows:
        raise ValidationError(f"no record {record_id}", field="record_id")
    row = rows[0]
    if not by.can_read(Scope(row["org"], row["division"], row["team"], row["actor"])):
        raise ValidationError(f"no record {record_id}", field="record_id")  # another scope's: not even its existence
    if row["known_since"] is None or row["known_since"] > basis.known_at or row["valid_from"] > basis.valid_at:
        return Seen(record_id, 0, None, None)
    sightings = store.vis.rows("sighting", by, basis, subject=row["subject"], columns=["derived_from", "valid_from"])
    times = [row["valid_from"]] + [
        s["valid_from"] for s in sightings.to_pylist() if s["derived_from"] and s["derived_from"][0] == record_id
    ]
    return Seen(record_id, len(times), min(times), max(times))
