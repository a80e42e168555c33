"""The kinds for conversations: what was said (`Turn`), free text about a subject (`Memory`),
a digest of turns (`Summary`), and the bookkeeping of a repeated statement (`Sighting`).

========== ================================ ===================================
kind        slot (lineage)                   lifecycle default
========== ================================ ===================================
turn        session + position               immutable; expires after ``TURN_TTL``
memory      subject + its normalised text    deduplicated by content, never superseded by
                                             another text (no attribute to compete for)
summary     session + subject                a new summary of a session supersedes the old;
                                             expires after ``SUMMARY_TTL``
sighting    seen record + the turn it was    one row per (record, turn): how often and when a
            seen in                          statement was made again (see `Sighting`)
========== ================================ ===================================

Turns are episodic memory (seed 001: the event log, 30–90 days): ``TURN_TTL`` is 90
days from ``said_at``. A benchmark's history is its test, so the loaders store turns
without a TTL unless told otherwise. Turns are not recalled unless asked for
(``kinds=["turn"]``): the raw log is the tier below memory, and what memory keeps of it
is what an extractor took out (`Memory`, `Fact`, `Preference`, `Summary`), each
pointing back at its turns through ``derived_from`` so that forgetting a speaker
cascades to everything extracted from what they said.

`records.py` registers these specs with the others; the write path validates them
through `validate`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pyarrow as pa

from .errors import ValidationError
from .records import Envelope, KindSpec, _slot
from .time import require_aware

TURN_TTL = timedelta(days=90)
SUMMARY_TTL = timedelta(days=90)
TURN_ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")


def normalise_text(text: str) -> str:
    """What two statements must share to be the same memory: case and spacing aside."""
    return re.sub(r"\s+", " ", text).strip().casefold().rstrip(".!")


@dataclass(frozen=True)
class Turn(Envelope):
    """One message of a conversation: who said what, in which session, at which position, when.

    Immutable: a turn is an event. Its subject (what forgetting names) is the speaker,
    else ``session:<session_id>``; `MemoryStore.capture` can name one for a whole session.

    >>> from datetime import datetime, timezone
    >>> Turn("s1", "user", "I moved to Austin", datetime(2026, 10, 4, tzinfo=timezone.utc),
    ...      speaker="Dana", position=3, source="chat").subject_name
    'Dana'
    """

    session_id: str
    role: str
    text: str
    said_at: datetime
    _: KW_ONLY
    speaker: str | None = None
    position: int = 0
    subject: str | None = None
    ttl: timedelta | None = TURN_TTL
    kind: ClassVar[str] = "turn"

    def _subject(self) -> str:
        return self.subject or self.speaker or f"session:{self.session_id}"

    def _valid_from(self) -> datetime | None:
        return self.said_at


@dataclass(frozen=True)
class Memory(Envelope):
    """A free-text statement about a subject: what an extractor keeps when it can name no attribute.

    Two memories of one subject never supersede each other; the same statement again
    (case and spacing aside) is a duplicate, which bumps its seen-count instead.
    ``valid_from`` defaults to the store clock at write.
    """

    subject: str
    text: str
    valid_from: datetime | None = None
    _: KW_ONLY
    valid_to: datetime | None = None
    kind: ClassVar[str] = "memory"

    def _subject(self) -> str:
        return self.subject

    def _valid_from(self) -> datetime | None:
        return self.valid_from

    def _valid_to(self) -> datetime | None:
        return self.valid_to


@dataclass(frozen=True)
class Summary(Envelope):
    """A digest of a session, ``derived_from`` the turns it covers (forgetting them hides it)."""

    session_id: str
    text: str
    valid_from: datetime | None = None
    _: KW_ONLY
    subject: str | None = None
    ttl: timedelta | None = SUMMARY_TTL
    kind: ClassVar[str] = "summary"

    def _subject(self) -> str:
        return self.subject or f"session:{self.session_id}"

    def _valid_from(self) -> datetime | None:
        return self.valid_from


@dataclass(frozen=True)
class Sighting(Envelope):
    """A statement made again: ``derived_from`` is ``(record seen, turn it was seen in)``.

    Reconcile writes one when an extracted record duplicates one in force, instead of a
    new version of it: appends stay blind and the sighting's system time is its commit's.
    Seen-count and last-seen are read back from these rows at the read's basis
    (`capture.reconcile.seen`). A row holds ids and times only; its subject is the seen
    record's, so forgetting the subject takes the sightings with it.
    """

    seen_at: datetime
    _: KW_ONLY
    subject: str = ""
    kind: ClassVar[str] = "sighting"

    def _subject(self) -> str:
        return self.subject

    def _valid_from(self) -> datetime | None:
        return self.seen_at


# --------------------------------------------------------------------------- specs


def _turn_slot(r: Turn, scope: Any) -> str:
    return _slot("turn", r.session_id, r.position)


SPECS: dict[str, KindSpec] = {
    "turn": KindSpec(
        kind="turn",
        cls=Turn,
        columns=[
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("role", pa.string(), nullable=False),
            pa.field("speaker", pa.string()),
            pa.field("position", pa.int64(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
        ],
        to_columns=lambda r: {
            "session_id": r.session_id,
            "role": r.role,
            "speaker": r.speaker,
            "position": int(r.position),
            "text": r.text,
        },
        from_columns=lambda row: {
            "session_id": row["session_id"],
            "role": row["role"],
            "speaker": row["speaker"],
            "position": row["position"],
            "text": row["text"],
            "said_at": row["valid_from"],
            "subject": row["subject"],
            "ttl": None,
        },
        slot=_turn_slot,
        content=lambda r: (r.role, r.speaker, r.text, r.said_at),
        # the speaker and the session in the searchable text (the LoCoMo protocol's memory)
        text_parts=("speaker", " (", "session_id", "): ", "text"),
    ),
    "memory": KindSpec(
        kind="memory",
        cls=Memory,
        columns=[pa.field("text", pa.string(), nullable=False)],
        to_columns=lambda r: {"text": r.text},
        from_columns=lambda row: {
            "subject": row["subject"],
            "text": row["text"],
            "valid_from": row["valid_from"],
            "valid_to": row["valid_to"],
        },
        slot=lambda r, scope: _slot("memory", r.subject, normalise_text(r.text)),
        content=lambda r: (r.valid_to,),
        text_parts=("subject", ": ", "text"),
    ),
    "summary": KindSpec(
        kind="summary",
        cls=Summary,
        columns=[pa.field("session_id", pa.string(), nullable=False), pa.field("text", pa.string(), nullable=False)],
        to_columns=lambda r: {"session_id": r.session_id, "text": r.text},
        from_columns=lambda row: {
            "session_id": row["session_id"],
            "text": row["text"],
            "valid_from": row["valid_from"],
            "subject": row["subject"],
            "ttl": None,
        },
        slot=lambda r, scope: _slot("summary", r.session_id, r._subject()),
        content=lambda r: (r.text, tuple(r.derived_from)),
        text_parts=("session_id", " summary: ", "text"),
    ),
    "sighting": KindSpec(
        kind="sighting",
        cls=Sighting,
        columns=[],
        to_columns=lambda r: {},
        from_columns=lambda row: {"seen_at": row["valid_from"], "subject": row["subject"]},
        slot=lambda r, scope: _slot("sighting", *r.derived_from),
        content=lambda r: (),
        text_parts=(),
    ),
}

#: Kinds the index does not embed: sightings have no text.
UNINDEXED_KINDS: frozenset[str] = frozenset({"sighting"})
#: Kinds whose free text the write path redacts, by field.
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "turn": ("text", "speaker"),
    "memory": ("text",),
    "summary": ("text",),
    "sighting": (),
}


def _text(value: Any, name: str, *, optional: bool = False) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if optional:
            return None
        raise ValidationError(f"{name} is required and must be a non-empty string", field=name)
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}", field=name)
    return value.strip()


def _ttl(value: Any) -> timedelta | None:
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise ValidationError("ttl must be a positive timedelta (or None: no expiry)", field="ttl")
    return value


def validate(r: Envelope, now: datetime) -> dict[str, Any] | None:
    """The write path's checks and normal form for the conversation kinds (None: not one of them).

    A returned ``expires_at`` is the default expiry, applied when the record sets none.
    """
    if isinstance(r, Turn):
        role = _text(r.role, "role")
        assert role is not None
        role = role.lower()
        if role not in TURN_ROLES:
            raise ValidationError(f"role must be one of {', '.join(TURN_ROLES)} (got {r.role!r})", field="role")
        if isinstance(r.position, bool) or not isinstance(r.position, int) or r.position < 0:
            raise ValidationError("position must be a non-negative integer", field="position")
        said_at = require_aware(r.said_at, "said_at")
        assert said_at is not None
        ttl = _ttl(r.ttl)
        return {
            "session_id": _text(r.session_id, "session_id"),
            "role": role,
            "text": _text(r.text, "text"),
            "said_at": said_at,
            "speaker": _text(r.speaker, "speaker", optional=True),
            "subject": _text(r.subject, "subject", optional=True),
            **_expiry(r, said_at, ttl),
        }
    if isinstance(r, Memory):
        valid_from = require_aware(r.valid_from, "valid_from", optional=True) or now
        valid_to = require_aware(r.valid_to, "valid_to", optional=True)
        if valid_to is not None and valid_to <= valid_from:
            raise ValidationError("valid_to must be after valid_from", field="valid_to")
        return {
            "subject": _text(r.subject, "subject"),
            "text": _text(r.text, "text"),
            "valid_from": valid_from,
            "valid_to": valid_to,
        }
    if isinstance(r, Summary):
        valid_from = require_aware(r.valid_from, "valid_from", optional=True) or now
        if not r.derived_from:
            raise ValidationError("a summary needs derived_from: the ids of the turns it covers", field="derived_from")
        return {
            "session_id": _text(r.session_id, "session_id"),
            "text": _text(r.text, "text"),
            "valid_from": valid_from,
            "subject": _text(r.subject, "subject", optional=True),
            **_expiry(r, valid_from, _ttl(r.ttl)),
        }
    if isinstance(r, Sighting):
        if len(r.derived_from) != 2:
            raise ValidationError("a sighting is derived_from (seen record, turn)", field="derived_from")
        return {"seen_at": require_aware(r.seen_at, "seen_at"), "subject": _text(r.subject, "subject")}
    return None


def _expiry(r: Envelope, start: datetime, ttl: timedelta | None) -> Mapping[str, Any]:
    return {"ttl": ttl} if r.expires_at is not None or ttl is None else {"ttl": ttl, "expires_at": start + ttl}
