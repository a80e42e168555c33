"""The one write path: validate → redact → normalize → reconcile → append.

Live writes, backfills (`write_many`), proposals, approvals and retractions all pass
through `Writer.commit`, so there is one definition of what a stored memory looks like
(no backfill skew). Bad input raises before any byte is written; a batch is one commit
per table it touches and is visible all-or-nothing.

Reconcile, per slot and scope, against the version in force at the new row's
``valid_from``: the same content is a ``duplicate`` (nothing written), different
content ``supersede``s it (with a pointer and a reason), no predecessor is ``inserted``.
The reason of a write is its commit's (the log keeps it for the audit trail, without the
batch's subject names); a row carries only the reason its own record gives.

Erased history stays erased: a record about a subject forgotten (inside the forget's
subtree) at or after the record's ``valid_from`` is never written — the same for a
record scoped to a forgotten actor; an undated record (a note without ``valid_from``)
that is a row a forget erased, again, is not written either (by its fingerprint in the
ledger). The ledger outlives every purge, so a re-run backfill cannot bring an erased
customer back. `write_many` drops such records and
reports each (action ``"forgotten"``, no record id) and writes the rest; `write`,
`propose` and `approve` of one such record raise `StaleGeneration` (nothing written).
Memory valid *after* the forget is a new life of the subject: written at its current
deletion generation, served, and erased again by the next forget.
"""

from __future__ import annotations

import bisect
import dataclasses
import gc
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, overload

import pyarrow as pa

from . import conversation
from . import policy as policy_rules
from .errors import PermissionDenied, StaleGeneration, ValidationError
from .forget import erasure_fingerprint, scrub_subjects
from .lake import Lake, commit_metadata, new_txn_id
from .limits import DEFAULT_MAX_TEXT_BYTES, check_limit, check_record_text, check_text
from .progress import Progress
from .query import Visibility
from .records import (
    AUTHORITIES,
    FAILED_EPISODE_TTL,
    OUTCOMES,
    SPECS,
    Envelope,
    Episode,
    Fact,
    Note,
    Policy,
    Preference,
    Reference,
    kind_of_record_id,
    new_record_id,
    record_from_row,
    spec_of,
    subject_key,
)
from .redact import Redactor
from .scope import Principal, Scope
from .time import Basis, require_aware

Action = Literal["inserted", "superseded", "duplicate", "forgotten"]
Status = Literal["active", "proposed", "retracted"]

#: Per-kind extra checks (e.g. who may write policies, policy overlap), called with the validated
#: batch of that kind, the visibility query, the acting principal and the status being written.
KindCheck = Callable[[Sequence[Envelope], Visibility, Principal, Status], None]


@dataclass(frozen=True)
class WriteResult:
    """What happened to one record."""

    record_id: str
    action: Action
    kind: str
    lineage_id: str
    scope: Scope
    supersedes: str | None = None
    txn_id: str | None = None
    version: int | None = None  # the Delta version of the commit that added it
    known_since: datetime | None = None  # system time of that commit
    redacted: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchResult:
    """The results of one `write_many`, in input order."""

    results: tuple[WriteResult, ...]
    txn_id: str | None
    versions: Mapping[str, int] = field(default_factory=dict)
    committed_at: datetime | None = None

    def __iter__(self) -> Iterator[WriteResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> WriteResult:
        return self.results[i]

    def count(self, action: Action) -> int:
        return sum(1 for r in self.results if r.action == action)

    @property
    def counts(self) -> dict[str, int]:
        """How many records were inserted, superseded, duplicate and forgotten (dropped)."""
        return {a: self.count(a) for a in ("inserted", "superseded", "duplicate", "forgotten")}

    @property
    def dropped(self) -> tuple[int, ...]:
        """Input positions of the records not written because their subject was forgotten."""
        return tuple(i for i, r in enumerate(self.results) if r.action == "forgotten")


#: Batches at least this big run with the garbage collector paused (see `Writer.commit`).
GC_PAUSE_BATCH = 256
#: A batch of this many records takes a second or more: it shows its phases (`progress.Progress`).
PROGRESS_RECORDS = 5000
#: The phases a big batch names as it goes (a bar's label on a terminal, log lines otherwise).
PHASES = ("validating", "checking and redacting", "reconciling with the store", "committing")

#: The free-text fields of each kind: what redaction scans.
_TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "envelope": ("evidence", "reason", "source"),  # source also goes into the commit log (writers)
    "fact": ("value",),
    "preference": ("value",),
    "note": ("value",),
    "episode": ("symptom", "action"),
    "reference": ("title", "content"),
    "policy": ("text",),
    **conversation.TEXT_FIELDS,
}


def _placed(r: Envelope) -> Scope:
    """The scope validation gave *r*: every record past `_prepare` has one."""
    if r.scope is None:
        raise ValidationError(f"{r.kind} record has no scope", field="scope")
    return r.scope


@overload
def _text(value: Any, name: str, *, optional: Literal[False] = False) -> str: ...
@overload
def _text(value: Any, name: str, *, optional: bool) -> str | None: ...
def _text(value: Any, name: str, *, optional: bool = False) -> str | None:
    if type(value) is str and value and not value[0].isspace() and not value[-1].isspace():
        return value  # the common case, already clean
    if value is None or (isinstance(value, str) and not value.strip()):
        if optional:
            return None
        raise ValidationError(f"{name} is required and must be a non-empty string", field=name)
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}", field=name)
    return value.strip()


class Writer:
    """Turns records into rows and commits them; knows nothing about reading for users."""

    def __init__(
        self,
        lake: Lake,
        visibility: Visibility,
        *,
        redactor: Redactor | None = None,
        generations: Callable[[Iterable[str]], Mapping[str, int]] | None = None,
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
    ) -> None:
        self.lake = lake
        self.vis = visibility
        self.redactor = redactor or Redactor()
        self.max_text_bytes = check_limit(max_text_bytes)
        self.generations = generations or (lambda keys: {})
        self.checks: dict[str, list[KindCheck]] = {}
        self._hashes: dict[str, str] = {}  # record_id -> content hash, for the batch being committed
        self._bar = Progress("", total=0, enabled=False)  # the batch under way's phases (`commit`)
        # one commit at a time per process: a batch's state lives on the writer (`_hashes`, `_allowed`),
        # and an extraction worker's thread writes beside the request path's
        self._commit_lock = threading.RLock()
        self.checks["policy"] = [self._check_policy_write]

    # ------------------------------------------------------------------ validate

    def _validate(
        self, record: Envelope, principal: Principal, scope: Scope | None, status: Status, now: datetime
    ) -> Envelope:
        """Check and normalise one record; return the writer's own copy of it (to redact next)."""
        spec_of(record)  # raises for non-records
        target = record.scope or scope or principal.scope
        if not isinstance(target, Scope):
            raise ValidationError("scope must be a Scope", field="scope")
        # one check per principal and scope in a batch (a tuple of the scope's path: no Python __eq__/__hash__)
        allowed = (id(principal), target.org, target.division, target.team, target.actor, status)
        if allowed not in self._allowed:
            if status == "proposed":
                principal.check_propose(target)
            else:
                principal.check_write(target)
            self._allowed.add(allowed)
        if record.authority is not None and record.authority not in AUTHORITIES:
            raise ValidationError(f"authority must be one of {', '.join(AUTHORITIES)}", field="authority")
        if record.confidence is not None and not (
            isinstance(record.confidence, (int, float)) and 0.0 <= record.confidence <= 1.0
        ):
            raise ValidationError("confidence must be a number between 0 and 1", field="confidence")
        derived: Any = record.derived_from  # typed a tuple; callers may pass anything, a str included
        if derived and (isinstance(derived, str) or not all(isinstance(d, str) for d in derived)):
            raise ValidationError("derived_from must be a sequence of record ids", field="derived_from")
        expires_at, evidence, reason, supersedes = record.expires_at, record.evidence, record.reason, record.supersedes
        changes: dict[str, Any] = {  # optional fields left out (None) are the common case: no call for them
            "scope": target,
            "expires_at": None if expires_at is None else require_aware(expires_at, "expires_at", optional=True),
            "evidence": None if evidence is None else _text(evidence, "evidence", optional=True),
            "reason": None if reason is None else _text(reason, "reason", optional=True),
            "derived_from": tuple(derived),
            "supersedes": None if supersedes is None else _text(supersedes, "supersedes", optional=True),
        }
        if isinstance(record, Note):
            # not "session:<id>": the source goes to the commit log, which outlives the note
            changes["source"] = _text(record.source, "source", optional=True) or "session"
        else:
            changes["source"] = _text(record.source, "source")
        changes.update(self._validate_kind(record, now))
        if isinstance(record, Policy) and status == "active" and changes["approved_by"] is None:
            changes["approved_by"] = principal.id  # a direct write by a curator is its approval
        if changes["expires_at"] is None:
            changes["expires_at"] = self._default_expiry(record, changes)
        own = _evolve(record, changes)
        check_record_text(own, self.max_text_bytes)
        return own

    def _validate_all(
        self, records: Sequence[Envelope], who: Sequence[Principal], scope: Scope | None, status: Status, now: datetime
    ) -> list[Envelope]:
        """`_validate` each record (by its principal in *who*); a bad one in a batch is named by its
        index (`ValidationError.index`)."""
        out: list[Envelope] = []
        try:
            for r, principal in zip(records, who, strict=True):
                out.append(self._validate(r, principal, scope, status, now))
        except ValidationError as exc:
            raise exc.at(len(out), prefix=len(records) > 1) from None
        return out

    def _validate_kind(self, r: Envelope, now: datetime) -> dict[str, Any]:
        said = conversation.validate(r, now)
        if said is not None:
            return said
        if isinstance(r, (Fact, Preference)):
            out: dict[str, Any] = {
                "subject": _text(r.subject, "subject"),
                "attribute": _text(r.attribute, "attribute").lower(),
                "valid_from": require_aware(r.valid_from, "valid_from"),
                "valid_to": None if r.valid_to is None else require_aware(r.valid_to, "valid_to", optional=True),
            }
            if r.value is None:
                raise ValidationError("value is required", field="value")
            if out["valid_to"] is not None and out["valid_to"] <= out["valid_from"]:
                raise ValidationError("valid_to must be after valid_from", field="valid_to")
            if (
                isinstance(r, Preference)
                and r.ttl is not None
                and (not isinstance(r.ttl, timedelta) or r.ttl <= timedelta(0))
            ):
                raise ValidationError("ttl must be a positive timedelta", field="ttl")
            return out
        if isinstance(r, Episode):
            outcome = _text(r.outcome, "outcome")
            if outcome not in OUTCOMES:
                raise ValidationError(
                    f"outcome must be one of {', '.join(OUTCOMES)} (got {r.outcome!r})", field="outcome"
                )
            evidence = _text(r.evidence, "evidence", optional=True)
            if evidence is None:
                raise ValidationError(
                    "an episode needs evidence a person can open (incident, PR or log link)", field="evidence"
                )
            return {
                "service": _text(r.service, "service"),
                "env": _text(r.env, "env"),
                "symptom": _text(r.symptom, "symptom"),
                "action": _text(r.action, "action"),
                "outcome": outcome,
                "observed_at": require_aware(r.observed_at, "observed_at"),
                "version_from": _text(r.version_from, "version_from", optional=True),
                "version_to": _text(r.version_to, "version_to", optional=True),
                "subject": _text(r.subject, "subject", optional=True),
            }
        if isinstance(r, Reference):
            return {
                "uri": _text(r.uri, "uri"),
                "title": _text(r.title, "title", optional=True) or "",
                "content": _text(r.content, "content"),
                "published_at": require_aware(r.published_at, "published_at"),
                "subject": _text(r.subject, "subject", optional=True),
            }
        if isinstance(r, Policy):
            if not isinstance(r.conditions, Mapping):
                raise ValidationError("conditions must be a mapping of field -> value", field="conditions")
            for k, v in r.conditions.items():
                if not isinstance(k, str) or not k.strip() or not isinstance(v, (str, int, float, bool)):
                    raise ValidationError(
                        f"condition {k!r} must map a field name to a scalar value", field="conditions"
                    )
            if isinstance(r.priority, bool) or not isinstance(r.priority, int):
                raise ValidationError("priority must be an integer", field="priority")
            out = {
                "policy_id": _text(r.policy_id, "policy_id"),
                "text": _text(r.text, "text"),
                "conditions": {k.strip(): v for k, v in r.conditions.items()},
                "effective_from": require_aware(r.effective_from, "effective_from"),
                "effective_to": require_aware(r.effective_to, "effective_to", optional=True),
                "approved_by": _text(r.approved_by, "approved_by", optional=True),
                "overrides": tuple(r.overrides),
                "subject": _text(r.subject, "subject", optional=True),
            }
            if out["effective_to"] is not None and out["effective_to"] <= out["effective_from"]:
                raise ValidationError("effective_to must be after effective_from", field="effective_to")
            return out
        if isinstance(r, Note):
            if not isinstance(r.ttl, timedelta) or r.ttl <= timedelta(0):
                raise ValidationError("ttl must be a positive timedelta", field="ttl")
            if r.value is None:
                raise ValidationError("value is required", field="value")
            return {
                "session_id": _text(r.session_id, "session_id"),
                "key": _text(r.key, "key"),
                "valid_from": require_aware(r.valid_from, "valid_from", optional=True) or now,
                "subject": _text(r.subject, "subject", optional=True),
            }
        raise ValidationError(f"unsupported record {type(r).__name__}", field="record")

    @staticmethod
    def _default_expiry(r: Envelope, changes: Mapping[str, Any]) -> datetime | None:
        if isinstance(r, Preference) and r.ttl is not None:
            expiry: datetime = changes["valid_from"] + r.ttl
            return expiry
        if isinstance(r, Episode) and changes["outcome"] == "failed":
            failed_until: datetime = changes["observed_at"] + FAILED_EPISODE_TTL
            return failed_until
        if isinstance(r, Note):
            note_until: datetime = changes["valid_from"] + r.ttl
            return note_until
        return None

    def _redact(self, records: Sequence[Envelope]) -> list[tuple[str, ...]]:
        """Scrub secrets from the text fields of the writer's own *records* copies, in place.

        One quick scan covers the whole batch (`Redactor.suspects`); only flagged texts and
        structured values (mappings, lists) go through the full patterns. Returns the kinds
        of what was removed, per record.
        """
        found: list[list[str]] = [[] for _ in records]

        def clean(value: Any, i: int) -> Any:
            if isinstance(value, str):
                text, kinds = self.redactor.redact(value)
                found[i].extend(kinds)
                return text
            if isinstance(value, Mapping):
                return {k: clean(v, i) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(clean(v, i) for v in value)
            return value

        texts: list[str] = []
        where: list[tuple[int, str]] = []
        for i, r in enumerate(records):
            values = r.__dict__
            for name in _TEXT_FIELDS["envelope"] + _TEXT_FIELDS[r.kind]:
                value = values[name]
                if type(value) is str:
                    texts.append(value)
                    where.append((i, name))
                elif value is not None and not isinstance(value, (int, float, bool)):
                    values[name] = clean(value, i)
        for j in self.redactor.suspects(texts):
            i, name = where[j]
            records[i].__dict__[name] = clean(texts[j], i)
        return [tuple(dict.fromkeys(f)) for f in found]

    # ------------------------------------------------------------------ approve / retract

    def _raw(self, record_id: str) -> tuple[str, dict[str, Any]]:
        """The stored row of a record, whatever its status (approve and retract start from it)."""
        kind = kind_of_record_id(record_id)
        rows = self.vis.by_ids(kind, [record_id]).to_pylist()
        if not rows:
            raise ValidationError(f"no record {record_id}", field="record_id")
        return kind, rows[0]

    def approve(
        self, record_id: str, by: Principal, *, reason: str | None = None, corrections: Mapping[str, Any] = {}
    ) -> WriteResult:
        """Promote a proposal to active memory, with optional corrections. Agents cannot approve."""
        kind, row = self._raw(record_id)
        if row["status"] != "proposed":
            raise ValidationError(f"{record_id} is {row['status']}, not a proposal", field="record_id")
        scope = Scope(row["org"], row["division"], row["team"], row["actor"])
        by.check_curate(scope, "approve")
        proposer = self.lake.views[kind].by_txn[row["txn_id"]].actor
        if proposer == by.id:
            raise PermissionDenied(f"{by.id} proposed {record_id} and cannot approve its own proposal")
        record = record_from_row(kind, row)
        base: dict[str, Any] = dict(
            status="active",
            record_id=None,
            lineage_id=None,
            txn_id=None,
            known_since=None,
            supersedes=record_id,
            authority=None,
        )
        if isinstance(record, Policy):
            base["approved_by"] = by.id
        if kind in ("preference", "note"):
            base["expires_at"] = row["expires_at"]
        try:
            record = replace(record, **{**base, **corrections})
        except TypeError as exc:
            raise ValidationError(f"unknown correction: {exc}", field="corrections") from exc
        return self.commit_one(
            record, by, reason=reason or f"approved proposal {record_id}", op="approve", reconcile=True
        )

    def retract(self, record_id: str, by: Principal, *, reason: str) -> WriteResult:
        """End a record: a new row that hides it from every later read (history keeps it)."""
        if not reason or not str(reason).strip():
            raise ValidationError("a retraction needs a reason", field="reason")
        kind, row = self._raw(record_id)
        if row["status"] != "active":
            raise ValidationError(
                f"{record_id} is {row['status']}; only active records can be retracted", field="record_id"
            )
        scope = Scope(row["org"], row["division"], row["team"], row["actor"])
        by.check_write(scope)
        record = replace(
            record_from_row(kind, row), record_id=None, txn_id=None, known_since=None, supersedes=record_id
        )  # the reason is the commit's (audit), not the row's
        return self.commit_one(record, by, reason=reason, status="retracted", op="retract", reconcile=False)

    # ------------------------------------------------------------------ policies

    def _check_policy_write(self, policies: Sequence[Envelope], vis: Visibility, by: Principal, status: str) -> None:
        """Policies are approved data: the write path's extra rules for the ``policy`` kind.

        * Only a curator or steward (inside its subtree) writes or retracts a policy; a
          member or agent proposes one, and a curator approves it.
        * A proposal carries no approval: ``approved_by`` is set by `approve`, never by
          the proposer. (A curator's direct write records the curator as approver.)
        * An active policy must not overlap another on the same scope without an
          intentional relationship (see `_check_policy_overlap`).
        """
        if status == "proposed":
            for p in policies:
                if isinstance(p, Policy) and p.approved_by:
                    raise ValidationError(
                        f"proposed policy {p.policy_id} claims approved_by={p.approved_by!r}; approval is "
                        "recorded by approve(), not by the proposer",
                        field="approved_by",
                    )
            return
        for p in policies:
            assert p.scope is not None
            by.check_curate(
                p.scope, "write a policy (propose it; a curator approves)" if status == "active" else "retract a policy"
            )
        if status == "active":
            self._check_policy_overlap([p for p in policies if isinstance(p, Policy)], vis)

    def _check_policy_overlap(self, policies: Sequence[Policy], vis: Visibility) -> None:
        """Refuse a batch that would make two policies of one scope tie (nothing is written).

        Stored policies are read through the one visibility query, at the store's current
        knowledge and at every instant a policy version starts inside a new one's range
        (see `policy.write_conflicts`), so a policy that starts later is compared too and a
        superseded version is not.
        """
        now = self.lake.clock.peek()

        def in_force(scope: Scope, at: datetime) -> list[Policy]:
            reader = Principal("policy-check", scope, role="steward")
            rows = vis.rows("policy", reader, Basis(now, at))
            stored = (record_from_row("policy", r) for r in rows.to_pylist())
            return [p for p in stored if isinstance(p, Policy) and p.scope == scope]

        # Candidate instants only (a superset is fine); which versions are in force at each
        # is decided by the visibility query above, never here.
        self.lake.refresh(kinds=["policy"])
        scopes = {p.scope for p in policies}
        rows = self.lake.known_rows("policy").select(["org", "division", "team", "actor", "valid_from"])
        stored = [
            r["valid_from"] for r in rows.to_pylist() if Scope(r["org"], r["division"], r["team"], r["actor"]) in scopes
        ]
        clash = policy_rules.write_conflicts(policies, in_force, stored)
        if clash:
            raise ValidationError("; ".join(_overlap_message(new, old, at) for new, old, at in clash), field="priority")

    # ------------------------------------------------------------------ commit

    def commit_one(self, record: Envelope, principal: Principal, **options: Any) -> WriteResult:
        """`commit` of one record, which raises `StaleGeneration` where a batch would drop it."""
        result = self.commit([record], principal, **options)[0]
        if result.action == "forgotten":
            raise self.stale(record)
        return result

    def stale(self, record: Envelope) -> StaleGeneration:
        """What a single write of *record* raises where a batch dropped it (action ``"forgotten"``)."""
        key = subject_key(record.subject_name)
        generation = self.generations([key]).get(key, 0)
        return StaleGeneration(
            key,
            generation,
            generation,
            message=(
                "the record's subject (or its scope's actor) was forgotten at or after the record's valid_from: "
                "writing it would bring erased history back, so nothing was written (memory valid after the "
                "forget is accepted as a new life of the subject)"
            ),
        )

    def commit(self, records: Sequence[Envelope], principal: Principal, **options: Any) -> BatchResult:
        """Validate, redact, reconcile and append *records* in one transaction (see `_commit`).

        A batch makes ~10 short-lived containers per record, none of them in a cycle, and
        the collector's passes over every live object of the process cost a backfill
        ~13% of its time (1,000-record batches at 100k records): big batches run with it
        paused, and it runs again, unchanged, when the batch is done.
        """
        n = 1 if isinstance(records, Envelope) else len(records)
        with (
            self._commit_lock,
            Progress(
                f"writing {n} records", total=len(PHASES), unit="steps", size=n, min_items=PROGRESS_RECORDS
            ) as bar,
        ):
            self._bar = bar  # `_commit` names its phases on it (a big batch takes seconds)
            if isinstance(records, Envelope) or len(records) < GC_PAUSE_BATCH or not gc.isenabled():
                return self._commit(records, principal, **options)
            gc.disable()
            try:
                return self._commit(records, principal, **options)
            finally:
                gc.enable()

    def _commit(
        self,
        records: Sequence[Envelope],
        principal: Principal,
        *,
        scope: Scope | None = None,
        reason: str | None = None,
        status: Status = "active",
        generation: int | Mapping[str, int] | None = None,
        op: str = "write",
        reconcile: bool = True,
        by_record: Sequence[Principal] | None = None,
    ) -> BatchResult:
        """Validate, redact, reconcile and append *records* in one transaction.

        Records are copied once (`_validate`); later steps fill in that copy, which no
        caller has seen yet, instead of copying a frozen record again per step.
        *by_record* (`store.batch()`) names each record's own principal, which authorises
        it; the commit's actor is then every distinct principal, comma-separated.
        """
        if isinstance(records, Envelope):
            records = [records]
        who = list(by_record) if by_record is not None else [principal] * len(records)
        if (
            len(who) != len(records)
            or not all(isinstance(p, Principal) for p in who)
            or not isinstance(principal, Principal)
        ):
            raise ValidationError("by= must be a Principal", field="by")
        if not records:
            return BatchResult((), None)
        if isinstance(reason, str):
            check_text("reason", reason, self.max_text_bytes)
        now = self.lake.clock.peek()
        self._allowed: set[tuple[Any, ...]] = set()
        bar = self._bar
        bar.phase(PHASES[0])
        validated = self._validate_all(records, who, scope, status, now)
        bar.advance()
        bar.phase(PHASES[1])
        prepared = list(zip(validated, self._redact(validated), strict=True))
        groups: dict[int, tuple[Principal, list[Envelope]]] = {}
        for r, p in zip(validated, who, strict=True):
            groups.setdefault(id(p), (p, []))[1].append(r)
        for p, mine in groups.values():
            for kind in {r.kind for r in mine}:
                for check in self.checks.get(kind, ()):
                    check([r for r in mine if r.kind == kind], self.vis, p, status)
        names = {r.subject_name for r in validated}
        keys = {subject_key(name) for name in names}
        current = self.generations(keys)
        if generation is not None:  # one generation, or one per subject key (a capture's many speakers)
            for key in keys:
                expected = generation.get(key, 0) if isinstance(generation, Mapping) else generation
                if current.get(key, 0) > expected:
                    raise StaleGeneration(key, expected, current.get(key, 0))
        forgotten = self.vis.forgotten.record_ids
        for r, _ in prepared if forgotten else ():
            if forgotten.intersection(r.derived_from) or (r.supersedes and r.supersedes in forgotten):
                key = subject_key(r.subject_name)
                expected = generation.get(key, 0) if isinstance(generation, Mapping) else generation or 0
                raise StaleGeneration(key, expected, current.get(key, 0))
        bar.advance()
        bar.phase(PHASES[2])
        refused = self._erased_history(validated, originals=records)
        planned = self._reconcile([p for i, p in enumerate(prepared) if i not in refused], status, reconcile)
        if refused:  # dropped records keep their place in the results
            kept = iter(planned)
            planned = [
                (
                    r,
                    _result(
                        record_id="",
                        action="forgotten",
                        kind=r.kind,
                        lineage_id=SPECS[r.kind].slot(r, _placed(r)),
                        scope=r.scope,
                        redacted=redacted,
                    ),
                    redacted,
                )
                if i in refused
                else next(kept)
                for i, (r, redacted) in enumerate(prepared)
            ]
        rows: dict[str, list[tuple[Envelope, WriteResult]]] = {}
        txn_id = new_txn_id()
        for record, result, _ in planned:
            if result.action not in ("duplicate", "forgotten"):
                rows.setdefault(record.kind, []).append((record, result))
        if not rows:
            return BatchResult(tuple(res for _, res, _ in planned), None)
        committed_at = self.lake.clock.read()
        meta = commit_metadata(
            txn_id=txn_id,
            committed_at=committed_at,
            op=op,
            actor=",".join(sorted({p.id for p, _ in groups.values()})),
            reason=self._commit_reason(reason, names),
            writers=[scrub_subjects(source, names) for source in {r.source for r, _, _ in planned}],
            kinds=list(rows),
            records=sum(len(v) for v in rows.values()),
        )
        bar.advance()
        bar.phase(PHASES[3])
        tables = {k: self._table(k, v, txn_id, status, current) for k, v in rows.items()}
        versions = self.lake.append(tables, meta)
        bar.advance()
        committed_at = self.lake.txn_known_since(txn_id) or committed_at  # later if a racing commit landed first
        for rec, res, _ in planned:  # the writer's own result objects, not yet handed out
            if res.action not in ("duplicate", "forgotten"):
                res.__dict__.update(txn_id=txn_id, version=versions.get(rec.kind), known_since=committed_at)
        return BatchResult(tuple(res for _, res, _ in planned), txn_id, versions, committed_at)

    def _erased_history(self, records: Sequence[Envelope], *, originals: Sequence[Envelope]) -> set[int]:
        """Input positions of the records a forget erased.

        A record is erased history when a tombstone of its subject (or of its scope's
        actor) covers its scope and was written at or after the record's ``valid_from``.
        A record written without world time of its own (undated among the caller's *originals*:
        a note with no ``valid_from``; the clock at the write dates it, after the forget) is erased
        history when it is a row a forget hid, again: same kind, slot, scope and content
        (`forget.erasure_fingerprint`). The ledger is the judge (it survives purge);
        `_commit` read it just before.
        """
        forgotten = self.vis.forgotten
        if not forgotten.tombstones:
            return set()
        by_key: dict[str, list[tuple[Any, ...]]] = {}
        for t in forgotten.tombstones:
            by_key.setdefault(t[0], []).append(t)
        out: set[int] = set()
        undated = [r.valid_interval[0] is None for r in originals]
        for i, r in enumerate(records):
            assert r.scope is not None  # validated
            if undated[i] and forgotten.fingerprints:
                lineage = SPECS[r.kind].slot(r, _placed(r))
                if erasure_fingerprint(r.kind, lineage, r.scope, _content_hash(r)) in forgotten.fingerprints:
                    out.add(i)
                    continue
            keys = [subject_key(r.subject_name)] + ([subject_key(r.scope.actor)] if r.scope.actor else [])
            valid_from = r.valid_interval[0]
            for key in keys:
                for _, _, forgotten_at, org, division, team in by_key.get(key, ()):
                    covers = all(
                        want is None or want == have
                        for want, have in ((org, r.scope.org), (division, r.scope.division), (team, r.scope.team))
                    )
                    if covers and valid_from is not None and valid_from <= forgotten_at:
                        out.add(i)
        return out

    def _commit_reason(self, reason: str | None, names: Iterable[str]) -> str | None:
        """The reason as the commit log keeps it: redacted, and without the batch's subject names.

        The log outlives every purge, so it keeps the *why* (audit reads it there) but not
        who it was about: the subjects are on the rows, which a purge can erase. The
        writers (sources) go to the log scrubbed the same way (a note's default source
        names its session, which is also its default subject).
        """
        return scrub_subjects(self.redactor.redact(reason)[0], names) if reason else None

    def _reconcile(
        self, prepared: Sequence[tuple[Envelope, tuple[str, ...]]], status: Status, enabled: bool
    ) -> list[tuple[Envelope, WriteResult, tuple[str, ...]]]:
        by_kind: dict[str, list[int]] = {}
        lineages: list[str] = []
        for i, (r, _) in enumerate(prepared):
            spec = SPECS[r.kind]  # validated already
            lineage = spec.slot(r, _placed(r))
            if isinstance(r, Episode) and r.supersedes:
                lineage = self._lineage_of(r.supersedes, "episode") or lineage
            lineages.append(lineage)
            by_kind.setdefault(spec.kind, []).append(i)
        # versions[(kind, lineage, scope path)] = sorted [(valid_from, seq, record_id, content_hash, ends_at)];
        # a scope path is (org, division, team, actor): a plain tuple hashes and compares without Python calls
        versions: dict[tuple[str, str, tuple[str | None, ...]], list[tuple[Any, ...]]] = {}
        active = enabled and status == "active"
        if active:
            for kind, idx in by_kind.items():
                known = self.lake.slot_rows(kind)  # slots new to the store need no lookup (bulk ingest)
                wanted = sorted(known.held(lineages[i] for i in idx))
                if not wanted:
                    continue
                existing = self.vis.slot_versions(kind, wanted)
                columns = [
                    _column_values(existing.column(c))
                    for c in ("lineage_id", "org", "division", "team", "actor", "valid_from", "record_id")
                ] + [_column_values(existing.column(c)) for c in ("content_hash", "ends_at")]
                for seq, (lineage, org, division, team, actor, valid_from, record_id, chash, ends_at) in enumerate(
                    zip(*columns, strict=True)
                ):
                    versions.setdefault((kind, lineage, (org, division, team, actor)), []).append(
                        (valid_from, seq, record_id, chash, ends_at)
                    )
        planned = []
        hashes = self._hashes = {}
        record_ids = _new_record_ids([r.kind for r, _ in prepared])
        for i, (r, redacted) in enumerate(prepared):
            kind = r.kind
            chash = _content_hash(r)
            valid_from, valid_to = r.valid_interval
            record_id = record_ids[i]
            scope = _placed(r)
            slot = versions.setdefault((kind, lineages[i], (scope.org, scope.division, scope.team, scope.actor)), [])
            pos = bisect.bisect_right(slot, (valid_from, float("inf"))) if slot else 0
            pred = slot[pos - 1] if pos and active else None
            # a predecessor that has ended or expired by now is not in force: restating it is news
            if pred is not None and pred[3] == chash and (pred[4] is None or pred[4] > valid_from):
                planned.append(
                    (
                        r,
                        _result(
                            record_id=pred[2],
                            action="duplicate",
                            kind=kind,
                            lineage_id=lineages[i],
                            scope=scope,
                            redacted=redacted,
                        ),
                        redacted,
                    )
                )
                continue
            if kind == "turn" and pred is not None:
                raise ValidationError(
                    f"turn {r.position} of session {r.session_id} is already recorded with other content; "  # type: ignore[attr-defined]  # kind == "turn": r is a Turn
                    "turns are immutable",
                    field="text",
                )
            if isinstance(r, Reference) and pred is not None and pred[0] == valid_from:
                raise ValidationError(
                    f"reference {r.uri} published at {valid_from.isoformat()} is already recorded with other "
                    "content; references are immutable — record a new publication date",
                    field="content",
                )
            supersedes = r.supersedes or (pred[2] if pred is not None else None)
            action: Action = "superseded" if supersedes else "inserted"
            slot.insert(pos, (valid_from, len(slot) + 10**9, record_id, chash, _ends_at(r, valid_to)))
            # the row keeps the record's own reason only: the commit's reason stays in the commit
            # (a copy here would be erased by a purge while the log keeps it: a false leftover)
            r.__dict__.update(record_id=record_id, lineage_id=lineages[i], supersedes=supersedes)
            hashes[record_id] = chash
            planned.append(
                (
                    r,
                    _result(
                        record_id=record_id,
                        action=action,
                        kind=kind,
                        lineage_id=lineages[i],
                        scope=scope,
                        supersedes=supersedes,
                        redacted=redacted,
                    ),
                    redacted,
                )
            )
        return planned

    def _lineage_of(self, record_id: str, kind: str) -> str | None:
        rows = self.vis.by_ids(kind, [record_id])
        return rows.column("lineage_id")[0].as_py() if rows.num_rows else None

    def _table(
        self,
        kind: str,
        items: Sequence[tuple[Envelope, WriteResult]],
        txn_id: str,
        status: Status,
        generations: Mapping[str, int],
    ) -> pa.Table:
        """The rows of one kind as an Arrow table, built column by column."""
        spec = SPECS[kind]
        records = [r for r, _ in items]
        subjects = [r.subject_name for r in records]
        keys = [subject_key(x) for x in subjects]
        intervals = [r.valid_interval for r in records]
        scopes = [r.scope for r in records if r.scope is not None]
        if len(scopes) != len(records):
            for r in records:
                _placed(r)  # raises, naming the kind
        columns: dict[str, list[Any]] = {
            "record_id": [res.record_id for _, res in items],
            "lineage_id": [res.lineage_id for _, res in items],
            "org": [sc.org for sc in scopes],
            "division": [sc.division for sc in scopes],
            "team": [sc.team for sc in scopes],
            "actor": [sc.actor for sc in scopes],
            "subject": subjects,
            "subject_key": keys,
            "valid_from": [iv[0] for iv in intervals],
            "valid_to": [iv[1] for iv in intervals],
            "txn_id": [txn_id] * len(records),
            "source": [r.source for r in records],
            "evidence": [r.evidence for r in records],
            "authority": [r.authority or _default_authority(r, status) for r in records],
            "status": [status] * len(records),
            "confidence": [r.confidence for r in records],
            "expires_at": [r.expires_at for r in records],
            "supersedes": [r.supersedes for r in records],
            "derived_from": [list(r.derived_from) for r in records],
            "reason": [r.reason for r in records],
            "content_hash": [self._hashes.get(res.record_id) or _content_hash(r) for r, res in items],
            "generation": [generations.get(k, 0) for k in keys],
        }
        kind_cols = [spec.to_columns(r) for r in records]
        for f in spec.columns:
            columns[f.name] = [c[f.name] for c in kind_cols]
        schema = spec.schema
        return pa.Table.from_arrays([pa.array(columns[f.name], f.type) for f in schema], schema=schema)


def _default_authority(r: Envelope, status: str) -> str:
    """Authority when the writer states none: proposals are guesses until a human confirms."""
    if status == "proposed":
        return "model_guess"
    if isinstance(r, Policy) and r.approved_by:
        return "published_policy"
    if isinstance(r, Reference):
        return "system_of_record"
    return "human_confirmed"


def _ends_at(r: Envelope, valid_to: datetime | None) -> datetime | None:
    """When a version stops being served: the earlier of its valid_to and expires_at."""
    if valid_to is None or r.expires_at is None:
        return valid_to if r.expires_at is None else r.expires_at
    return min(valid_to, r.expires_at)


def _column_values(column: pa.ChunkedArray) -> list[Any]:
    """A column as Python values; UTC timestamps without a zoneinfo lookup per value (~8 µs a row)."""
    if pa.types.is_timestamp(column.type) and column.type.tz is not None:
        naive = column.cast(pa.timestamp(column.type.unit)).to_pylist()
        return [None if v is None else v.replace(tzinfo=UTC) for v in naive]
    values: list[Any] = column.to_pylist()
    return values


def _new_record_ids(kinds: Sequence[str]) -> list[str]:
    """`records.new_record_id` for each of *kinds*, from one read of the OS's random source."""
    if len(kinds) < 8:
        return [new_record_id(k) for k in kinds]
    pool = os.urandom(16 * len(kinds)).hex()
    return [f"{k[:3]}_{pool[32 * i : 32 * i + 32]}" for i, k in enumerate(kinds)]


def _result(**fields: Any) -> WriteResult:
    """A `WriteResult` built without the frozen dataclass's per-field setattr (~3 µs a record)."""
    result = object.__new__(WriteResult)
    result.__dict__.update(_RESULT_DEFAULTS, **fields)
    return result


_RESULT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(WriteResult) if f.default is not dataclasses.MISSING}


def _evolve(record: Envelope, changes: Mapping[str, Any]) -> Envelope:
    """A copy of a frozen record with *changes*: validated values only, so no re-validation.

    ``dataclasses.replace`` re-runs ``__init__`` over ~20 fields; on the batched write
    path that alone cost more than the Delta append.
    """
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(changes)
    return new


def _content_hash(r: Envelope) -> str:
    """Identity of a record's content within its slot (duplicate detection)."""
    return hashlib.blake2b(repr(SPECS[r.kind].content(r)).encode(), digest_size=16).hexdigest()


def _overlap_message(new: Policy, old: Policy, at: datetime) -> str:
    where = f"on scope {new.scope} from {at.isoformat()}"
    if old.policy_id in new.overrides and new.policy_id in old.overrides:
        return (
            f"policies {new.policy_id} and {old.policy_id} each declare that they override the other {where}: "
            "declare the relationship in one direction only, or set different priorities"
        )
    return (
        f"policy {new.policy_id} overlaps {old.policy_id}"
        + (f" ({old.record_id})" if old.record_id else "")
        + f" {where}: equal priority {new.priority} and conditions that can match the same case; "
        f"set a different priority or declare overrides=[{old.policy_id!r}]"
    )
