"""Typed memory records and their lifecycle rules.

Each kind is a frozen dataclass with its own table, its own notion of a *slot* (the
lineage that versions supersede each other in) and its own defaults:

========== ================================ ===================================
kind        slot (lineage)                   lifecycle default
========== ================================ ===================================
fact        subject + attribute              supersession per slot
preference  subject + attribute              expires after ``PREFERENCE_TTL``
episode     the episode itself               failed outcomes expire after 90 days
reference   uri                              immutable per ``published_at``
policy      policy_id                        versions supersede for their range
note        session + key                    working memory: hours of TTL
turn, memory, summary, sighting              see `conversation` (what was said, and what
                                             memory keeps of it)
========== ================================ ===================================

Everything about a kind lives here: the write path, the visibility query and the
index read these specs instead of re-stating the rules.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Self

import pyarrow as pa

from .errors import ValidationError
from .scope import Scope

AUTHORITIES: tuple[str, ...] = (
    "model_guess",
    "customer_claim",
    "system_of_record",
    "human_confirmed",
    "published_policy",
)  # weakest first
STATUSES: tuple[str, ...] = ("proposed", "active", "retracted")
OUTCOMES: tuple[str, ...] = ("fixed", "failed", "inconclusive")

PREFERENCE_TTL = timedelta(days=180)
FAILED_EPISODE_TTL = timedelta(days=90)
NOTE_TTL = timedelta(hours=4)

TS = pa.timestamp("us", tz="UTC")


def new_record_id(kind: str) -> str:
    """``fac_`` + 128 random bits: the kind is readable from the id, nothing else is."""
    return f"{kind[:3]}_{os.urandom(16).hex()}"


@functools.lru_cache(maxsize=65536)
def subject_key(subject: str) -> str:
    """A stable, non-reversible key for a subject: what the ledger and stats may hold."""
    return hashlib.sha256(b"memlake-subject\x00" + subject.strip().casefold().encode()).hexdigest()


def fact_slot(kind: str, subject: str, attribute: str) -> str:
    """The lineage id of a fact's or preference's slot: its kind, subject and attribute,
    each stripped and case-folded. Reads of one slot (`Store.get_fact`) look its heads up by
    it (`heads.OrgHeads.visible`), so the write path and the read share this definition."""
    return _slot(kind, subject, attribute)


#: What a slot's parts are joined by before they are hashed (`_slot`).
SLOT_SEPARATOR = "\x1f"


def _slot(*parts: Any) -> str:
    """A slot's lineage id: a hash of its parts, each stripped and case-folded (None as empty).

    The parts are joined by `SLOT_SEPARATOR`, unless one holds it: joined, ("a<sep>b", "c")
    and ("a", "b<sep>c") were one string, so a fact about subject "a" superseded one about
    "a<sep>b". Such parts are spelled as a JSON list after a mark no join begins with (a
    join begins with the kind's name), which keeps every other slot's id as it was.
    """
    folded = ["" if p is None else str(p).strip().casefold() for p in parts]  # a list: ~1 µs less
    raw = SLOT_SEPARATOR.join(folded)
    if raw.count(SLOT_SEPARATOR) != len(folded) - 1:
        raw = "\x1e" + json.dumps(folded)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True)
class Envelope:
    """Columns every record carries (see DESIGN.md § Data model).

    ``record_id``, ``status``, ``txn_id`` and ``known_since`` are set by the store:
    records you build have them empty, records you read back have them filled.
    """

    scope: Scope | None = None
    source: str = ""
    evidence: str | None = None
    authority: str | None = None
    confidence: float | None = None
    expires_at: datetime | None = None
    supersedes: str | None = None
    derived_from: tuple[str, ...] = ()
    reason: str | None = None
    # filled by the store
    record_id: str | None = None
    lineage_id: str | None = None
    status: str = "active"
    txn_id: str | None = None
    known_since: datetime | None = None

    kind: ClassVar[str] = ""

    # Each kind answers these four; the spec below wires them to the table.
    def _subject(self) -> str:
        raise NotImplementedError

    def _valid_from(self) -> datetime | None:
        raise NotImplementedError

    def _valid_to(self) -> datetime | None:
        return None

    @property
    def subject_name(self) -> str:
        return self._subject()

    @property
    def valid_interval(self) -> tuple[datetime | None, datetime | None]:
        return self._valid_from(), self._valid_to()

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class _AttributeRecord(Envelope):
    """A value of one attribute of a subject over a valid interval (facts and preferences)."""

    subject: str
    attribute: str
    value: Any
    valid_from: datetime
    _: KW_ONLY
    valid_to: datetime | None = None

    def _subject(self) -> str:
        return self.subject

    def _valid_from(self) -> datetime | None:
        return self.valid_from

    def _valid_to(self) -> datetime | None:
        return self.valid_to


@dataclass(frozen=True)
class Fact(_AttributeRecord):
    """A slowly changing attribute of a subject; a new value supersedes the old one.

    >>> from datetime import datetime, timezone
    >>> Fact("user:42", "plan", "Enterprise Pro", datetime(2026, 10, 4, tzinfo=timezone.utc),
    ...      source="user_explicit").attribute
    'plan'
    """

    kind: ClassVar[str] = "fact"


@dataclass(frozen=True)
class Preference(_AttributeRecord):
    """A stated preference; it expires (``ttl``, default 180 days) and conflicts supersede."""

    ttl: timedelta | None = field(default=PREFERENCE_TTL, kw_only=True)
    kind: ClassVar[str] = "preference"


@dataclass(frozen=True)
class Episode(Envelope):
    """What was tried, on what, and what happened — with evidence a person can open.

    A failed outcome is evidence about one version and one environment, so it expires
    after 90 days unless ``expires_at`` says otherwise.
    """

    service: str
    env: str
    symptom: str
    action: str
    outcome: str
    observed_at: datetime
    _: KW_ONLY
    version_from: str | None = None
    version_to: str | None = None
    subject: str | None = None
    kind: ClassVar[str] = "episode"

    def _subject(self) -> str:
        return self.subject or f"service:{self.service}"

    def _valid_from(self) -> datetime | None:
        return self.observed_at


@dataclass(frozen=True)
class Reference(Envelope):
    """An immutable citation: a document as published at a time."""

    uri: str
    title: str
    content: str
    published_at: datetime
    _: KW_ONLY
    subject: str | None = None
    kind: ClassVar[str] = "reference"

    def _subject(self) -> str:
        return self.subject or f"ref:{self.uri}"

    def _valid_from(self) -> datetime | None:
        return self.published_at


@dataclass(frozen=True)
class Policy(Envelope):
    """A rule with exact-match conditions and an effective range (world time).

    A new version of a ``policy_id`` supersedes the previous one only from its own
    ``effective_from`` on: orders placed earlier are still governed by the old one.
    """

    policy_id: str
    text: str
    conditions: Mapping[str, Any]
    effective_from: datetime
    _: KW_ONLY
    effective_to: datetime | None = None
    priority: int = 0
    approved_by: str | None = None
    overrides: tuple[str, ...] = ()
    subject: str | None = None
    kind: ClassVar[str] = "policy"

    def _subject(self) -> str:
        return self.subject or f"policy:{self.policy_id}"

    def _valid_from(self) -> datetime | None:
        return self.effective_from

    def _valid_to(self) -> datetime | None:
        return self.effective_to


@dataclass(frozen=True)
class Note(Envelope):
    """Working memory: session scratch with hours of TTL, kept in its own table."""

    session_id: str
    key: str
    value: Any
    _: KW_ONLY
    ttl: timedelta = NOTE_TTL
    valid_from: datetime | None = None  # default: the store clock at write
    subject: str | None = None
    kind: ClassVar[str] = "note"

    def _subject(self) -> str:
        return self.subject or f"session:{self.session_id}"

    def _valid_from(self) -> datetime | None:
        return self.valid_from


Record = Envelope  # any of the kinds above

# --------------------------------------------------------------------------- schema

ENVELOPE_FIELDS: list[pa.Field] = [
    pa.field("record_id", pa.string(), nullable=False),
    pa.field("lineage_id", pa.string(), nullable=False),
    pa.field("org", pa.string(), nullable=False),
    pa.field("division", pa.string()),
    pa.field("team", pa.string()),
    pa.field("actor", pa.string()),
    pa.field("subject", pa.string(), nullable=False),
    pa.field("subject_key", pa.string(), nullable=False),
    pa.field("valid_from", TS, nullable=False),
    pa.field("valid_to", TS),
    pa.field("txn_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("evidence", pa.string()),
    pa.field("authority", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("confidence", pa.float64()),
    pa.field("expires_at", TS),
    pa.field("supersedes", pa.string()),
    pa.field("derived_from", pa.list_(pa.string())),
    pa.field("reason", pa.string()),
    pa.field("content_hash", pa.string(), nullable=False),
    pa.field("generation", pa.int64(), nullable=False),  # the subject's deletion generation at write
]

#: Columns whose min/max may appear in the Delta log: times only, never content or ids.
STATS_COLUMNS: tuple[str, ...] = ("valid_from", "valid_to", "expires_at")


def _json(value: Any, field_name: str) -> str:
    if type(value) is str:  # the common case, exactly what json.dumps(value, ensure_ascii=False) returns
        return _encode_str(value)
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=_json_default)
    except TypeError as exc:
        raise ValidationError(f"{field_name} is not JSON-serialisable: {exc}", field=field_name) from exc


_encode_str = json.encoder.encode_basestring


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


@dataclass(frozen=True)
class KindSpec:
    """How one record kind maps to its Delta table."""

    kind: str
    cls: type
    columns: Sequence[pa.Field]
    to_columns: Callable[[Any], dict[str, Any]]
    from_columns: Callable[[Mapping[str, Any]], dict[str, Any]]
    slot: Callable[[Any, Scope], str]
    content: Callable[[Any], tuple[Any, ...]]
    text_parts: tuple[str, ...]  # column names and literal separators making a row's search text

    @property
    def table(self) -> str:
        return self.kind

    def search_text(self, rows: pa.Table) -> pa.Array:
        """The search text of each row: what lexical ranking and embeddings read."""
        import pyarrow.compute as pc

        if rows.num_rows == 0:
            return pa.array([], pa.string())
        names = set(rows.column_names)
        # typed scalars: a bare str makes pyarrow infer a type, which tries (and fails) to
        # import dateutil on every call
        parts = [pc.fill_null(rows.column(p), _EMPTY) if p in names else _literal(p) for p in self.text_parts]
        return pc.binary_join_element_wise(*parts, _EMPTY)

    def search_text_of(self, row: Mapping[str, Any]) -> str:
        """`search_text` of one row given as its columns (a missing or null one reads as ""):
        recall's few winners, already Python values, cost ~50 µs a kind in Arrow."""
        columns = self.text_columns
        return "".join(str(row.get(p) or "") if p in columns else p for p in self.text_parts)

    @functools.cached_property
    def schema(self) -> pa.Schema:  # built once: reads ask for it on every take
        return pa.schema(ENVELOPE_FIELDS + list(self.columns))

    @functools.cached_property
    def text_columns(self) -> tuple[str, ...]:
        """The columns `search_text` reads (its other parts are literal separators)."""
        names = set(self.schema.names)
        return tuple(dict.fromkeys(p for p in self.text_parts if p in names))


_EMPTY = pa.scalar("", pa.string())


@functools.cache
def _literal(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.string())


def _fact_like(kind: str, cls: type, text_parts: tuple[str, ...]) -> KindSpec:
    return KindSpec(
        kind=kind,
        cls=cls,
        columns=[pa.field("attribute", pa.string(), nullable=False), pa.field("value", pa.string())],
        to_columns=lambda r: {"attribute": r.attribute, "value": _json(r.value, "value")},
        from_columns=lambda row: {
            "subject": row["subject"],
            "attribute": row["attribute"],
            "value": json.loads(row["value"]),
            "valid_from": row["valid_from"],
            "valid_to": row["valid_to"],
        },
        slot=lambda r, scope: fact_slot(kind, r.subject, r.attribute),
        content=lambda r: (_json(r.value, "value"), r.valid_to),
        text_parts=text_parts,
    )


def _episode_slot(r: Episode, scope: Scope) -> str:
    return _slot(
        "episode",
        r.service,
        r.env,
        r.symptom,
        r.action,
        r.outcome,
        r.version_from,
        r.version_to,
        r.observed_at.isoformat(),
        r.evidence,
    )


SPECS: dict[str, KindSpec] = {
    "fact": _fact_like("fact", Fact, ("subject", " ", "attribute", ": ", "value")),
    "preference": _fact_like("preference", Preference, ("subject", " prefers ", "attribute", ": ", "value")),
    "episode": KindSpec(
        kind="episode",
        cls=Episode,
        columns=[
            pa.field("service", pa.string(), nullable=False),
            pa.field("env", pa.string(), nullable=False),
            pa.field("symptom", pa.string(), nullable=False),
            pa.field("action", pa.string(), nullable=False),
            pa.field("outcome", pa.string(), nullable=False),
            pa.field("version_from", pa.string()),
            pa.field("version_to", pa.string()),
        ],
        to_columns=lambda r: {
            "service": r.service,
            "env": r.env,
            "symptom": r.symptom,
            "action": r.action,
            "outcome": r.outcome,
            "version_from": r.version_from,
            "version_to": r.version_to,
        },
        from_columns=lambda row: {
            "service": row["service"],
            "env": row["env"],
            "symptom": row["symptom"],
            "action": row["action"],
            "outcome": row["outcome"],
            "observed_at": row["valid_from"],
            "version_from": row["version_from"],
            "version_to": row["version_to"],
            "subject": row["subject"],
        },
        slot=_episode_slot,
        # everything a correction may change: a superseding row with a closed version range
        # or a reworded action is news, not a duplicate
        content=lambda r: (r.symptom, r.action, r.outcome, r.evidence, r.version_from, r.version_to, r.subject),
        text_parts=("service", " ", "env", ": ", "symptom", "; tried ", "action", " -> ", "outcome"),
    ),
    "reference": KindSpec(
        kind="reference",
        cls=Reference,
        columns=[
            pa.field("uri", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("content", pa.string()),
        ],
        to_columns=lambda r: {"uri": r.uri, "title": r.title, "content": r.content},
        from_columns=lambda row: {
            "uri": row["uri"],
            "title": row["title"],
            "content": row["content"],
            "published_at": row["valid_from"],
            "subject": row["subject"],
        },
        slot=lambda r, scope: _slot("reference", r.uri),
        content=lambda r: (r.title, r.content, r.published_at),
        text_parts=("title", ". ", "content"),
    ),
    "policy": KindSpec(
        kind="policy",
        cls=Policy,
        columns=[
            pa.field("policy_id", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("conditions", pa.string(), nullable=False),
            pa.field("priority", pa.int64(), nullable=False),
            pa.field("approved_by", pa.string()),
            pa.field("overrides", pa.list_(pa.string())),
        ],
        to_columns=lambda r: {
            "policy_id": r.policy_id,
            "text": r.text,
            "conditions": _json(dict(r.conditions), "conditions"),
            "priority": int(r.priority),
            "approved_by": r.approved_by,
            "overrides": list(r.overrides),
        },
        from_columns=lambda row: {
            "policy_id": row["policy_id"],
            "text": row["text"],
            "conditions": json.loads(row["conditions"]),
            "effective_from": row["valid_from"],
            "effective_to": row["valid_to"],
            "priority": row["priority"],
            "approved_by": row["approved_by"],
            "overrides": tuple(row["overrides"] or ()),
            "subject": row["subject"],
        },
        slot=lambda r, scope: _slot("policy", r.policy_id),
        content=lambda r: (
            r.text,
            _json(dict(r.conditions), "conditions"),
            r.effective_to,
            r.priority,
            r.approved_by,
            tuple(r.overrides),
        ),
        text_parts=("policy_id", ": ", "text"),
    ),
    "note": KindSpec(
        kind="note",
        cls=Note,
        columns=[
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("key", pa.string(), nullable=False),
            pa.field("value", pa.string()),
        ],
        to_columns=lambda r: {"session_id": r.session_id, "key": r.key, "value": _json(r.value, "value")},
        from_columns=lambda row: {
            "session_id": row["session_id"],
            "key": row["key"],
            "value": json.loads(row["value"]),
            "valid_from": row["valid_from"],
            "subject": row["subject"],
        },
        slot=lambda r, scope: _slot("note", r.session_id, r.key),
        content=lambda r: (_json(r.value, "value"),),
        text_parts=("key", ": ", "value"),
    ),
}

from .conversation import SPECS as _CONVERSATION_SPECS  # noqa: E402 - they build on the classes above

SPECS.update(_CONVERSATION_SPECS)

KINDS: tuple[str, ...] = tuple(SPECS)
#: What recall reads unless told otherwise: not working memory (notes), not the raw log
#: (turns: ``kinds=["turn"]``), not bookkeeping (sightings).
MEMORY_KINDS: tuple[str, ...] = ("fact", "preference", "episode", "reference", "policy", "memory", "summary")


KIND_PREFIXES: dict[str, str] = {kind[:3]: kind for kind in SPECS}


def kind_of_record_id(record_id: str) -> str:
    """Record ids start with their kind (``fac_…``), so a lookup by id needs no scan of every table."""
    kind = KIND_PREFIXES.get(str(record_id)[:3])
    if kind is None or str(record_id)[3:4] != "_":
        raise ValidationError(f"{record_id!r} is not a record id of this store", field="record_id")
    return kind


def spec_of(record: Any) -> KindSpec:
    kind = getattr(record, "kind", None)
    if kind not in SPECS or not isinstance(record, SPECS[kind].cls):
        raise ValidationError(
            f"not a memory record: {type(record).__name__} (use Fact, Preference, Episode, Reference, Policy, Note, "
            "Turn, Memory or Summary)",
            field="record",
        )
    return SPECS[kind]


def check_kinds(kinds: Sequence[str] | None) -> tuple[str, ...]:
    if kinds is None:
        return MEMORY_KINDS
    if isinstance(kinds, str):
        kinds = [kinds]
    unknown = [k for k in kinds if k not in SPECS]
    if unknown:
        raise ValidationError(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}", field="kinds")
    return tuple(kinds)


@functools.lru_cache(maxsize=4096)
def _scope(org: str, division: str | None, team: str | None, actor: str | None) -> Scope:
    """One `Scope` per distinct scope read back (validated once): reads rebuild records of a
    few scopes by the thousand, and a scope is immutable."""
    return Scope(org, division, team, actor)


#: Stored columns `record_from_row` does not read: derived at write (a key, a hash, a generation).
_NOT_READ_BACK = frozenset({"subject_key", "content_hash", "generation"})


@functools.cache
def record_columns(kind: str) -> tuple[str, ...]:
    """The columns `record_from_row` reads: what a read takes of the rows it returns (a take
    costs per column)."""
    return tuple(n for n in SPECS[kind].schema.names if n not in _NOT_READ_BACK) + ("known_since",)


def record_from_row(kind: str, row: Mapping[str, Any]) -> Envelope:
    """Rebuild a typed record from a row of its table (plus ``known_since`` if joined)."""
    spec = SPECS[kind]
    scope = _scope(row["org"], row.get("division"), row.get("team"), row.get("actor"))
    kw = spec.from_columns(row)
    kw.update(
        scope=scope,
        source=row["source"],
        evidence=row.get("evidence"),
        authority=row.get("authority"),
        confidence=row.get("confidence"),
        expires_at=row.get("expires_at"),
        supersedes=row.get("supersedes"),
        derived_from=tuple(row.get("derived_from") or ()),
        reason=row.get("reason"),
        record_id=row["record_id"],
        lineage_id=row["lineage_id"],
        status=row["status"],
        txn_id=row.get("txn_id"),
        known_since=row.get("known_since"),
    )
    if kind in ("preference", "note"):
        kw["ttl"] = None if kind == "preference" else NOTE_TTL
    record: Envelope = spec.cls(**kw)
    return record


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, field_name: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"15m"``, ``"45s"``, ``"2w"`` as a timedelta (JSON has no duration type).

    >>> parse_duration("30d", "ttl").days
    30
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValidationError(
            f"{field_name} {text!r} is not a duration: write a number and a unit, "
            "like 30d, 12h, 15m or 45s (or ttl_seconds: a number)",
            field=field_name,
        )
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def from_dict(obj: Mapping[str, Any]) -> Envelope:
    """Build a record from a JSON-style mapping with a ``kind`` key (the CLI's input format).

    >>> from_dict({"kind": "fact", "subject": "user:42", "attribute": "plan", "value": "Pro",
    ...            "valid_from": "2026-10-04T14:32:00Z", "source": "user_explicit", "scope": "acme/support"}).scope.path
    'acme/support'
    """
    if not isinstance(obj, Mapping):
        raise ValidationError("each record must be a JSON object", field="record")
    data = dict(obj)
    kind = data.pop("kind", None)
    if kind not in SPECS:
        raise ValidationError(f"record needs kind: one of {', '.join(KINDS)} (got {kind!r})", field="kind")
    cls = SPECS[kind].cls
    if isinstance(data.get("scope"), str):
        data["scope"] = Scope.parse(data["scope"])
    for name in ("derived_from", "overrides"):
        if isinstance(data.get(name), list):
            data[name] = tuple(data[name])
    if "ttl_seconds" in data:
        seconds = data.pop("ttl_seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ValidationError(f"ttl_seconds must be a number of seconds, got {seconds!r}", field="ttl_seconds")
        data["ttl"] = timedelta(seconds=seconds)
    elif data.get("ttl") is not None:
        data["ttl"] = parse_duration(data["ttl"] if isinstance(data["ttl"], str) else repr(data["ttl"]), "ttl")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValidationError(f"{kind} has no field(s) {', '.join(unknown)}", field=unknown[0])
    try:
        record: Envelope = cls(**data)
        return record
    except TypeError as exc:
        raise ValidationError(f"{kind}: {exc}", field="record") from exc


def to_dict(record: Envelope) -> dict[str, Any]:
    """A JSON-ready mapping of a record (datetimes as ISO strings, scope as a path)."""
    out: dict[str, Any] = {"kind": record.kind}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Scope):
            value = value.path
        elif isinstance(value, timedelta):
            value = value.total_seconds()
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
