"""UTC handling and the read basis.

A read is evaluated at a basis ``(known_at, valid_at)``: *known_at* is system time (what
the store had committed), *valid_at* is world time (what was true). ``as_of=T`` sets
both, which is the replay case. Naive datetimes are rejected, never assumed UTC.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, overload

from .errors import ValidationError

Clock = Callable[[], datetime]

#: The smallest step the store records; Delta and Arrow keep microseconds.
EPSILON = timedelta(microseconds=1)


def wall_clock() -> datetime:
    return datetime.now(UTC)


@overload
def require_aware(value: object, field: str, *, optional: Literal[False] = False) -> datetime: ...
@overload
def require_aware(value: object, field: str, *, optional: bool) -> datetime | None: ...
def require_aware(value: object, field: str, *, optional: bool = False) -> datetime | None:
    """Return *value* as a UTC datetime, or raise ValidationError naming *field*."""
    if value is None:
        if optional:
            return None
        raise ValidationError(f"{field} is required", field=field)
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValidationError(f"{field}: {text!r} is not an ISO-8601 datetime", field=field) from exc
        if value.tzinfo is None:  # text in, text out: no Python hint for a JSON or CLI user
            raise ValidationError(
                f"{field}: {text!r} has no time zone: add Z for UTC (2026-10-04T14:32:00Z) or an offset such as +02:00",
                field=field,
            )
    if not isinstance(value, datetime):
        raise ValidationError(f"{field} must be a datetime, got {type(value).__name__}", field=field)
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValidationError(
            f"{field} is a naive datetime ({value.isoformat()}); pass a timezone-aware one "
            "(e.g. datetime(..., tzinfo=timezone.utc))",
            field=field,
        )
    return value.astimezone(UTC)


@dataclass(frozen=True)
class Basis:
    """The two clocks a read is evaluated at."""

    known_at: datetime
    valid_at: datetime

    def describe(self) -> str:
        return f"known_at={self.known_at.isoformat()} valid_at={self.valid_at.isoformat()}"


def resolve_basis(
    now: datetime,
    *,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    valid_at: datetime | None = None,
) -> Basis:
    """Build the basis of a read: ``as_of`` sets both clocks; either may be overridden."""
    as_of = require_aware(as_of, "as_of", optional=True)
    known = require_aware(known_at, "known_at", optional=True)
    valid = require_aware(valid_at, "valid_at", optional=True)
    default = as_of or now
    return Basis(known_at=known or default, valid_at=valid or default)


class StoreClock:
    """The store's clock: the injected reading, never going backwards.

    Its readings become each commit's system time, so scenarios and tests can tell a
    story over weeks with a simulated clock. Equal readings are allowed; commit order
    breaks ties.
    """

    def __init__(self, source: Clock | None = None) -> None:
        self._source = source or wall_clock
        self._last: datetime | None = None
        self._lock = threading.Lock()
        self._pinned: datetime | None = None

    def _reading(self) -> datetime:
        pinned = self._pinned
        reading = pinned if pinned is not None else require_aware(self._source(), "clock()")
        assert reading is not None
        return reading

    @contextmanager
    def pinned(self, at: datetime) -> Iterator[None]:
        """Read *at* while the block runs (never earlier than a commit already made).

        What a loader does to write each session of a benchmark at that session's date,
        so that ``as_of=`` on the loaded store means what it says. Applies to every
        thread writing through this store while the block runs.
        """
        moment = require_aware(at, "at")
        with self._lock:
            previous, self._pinned = self._pinned, moment
        try:
            yield
        finally:
            with self._lock:
                self._pinned = previous

    def observe(self, seen: datetime) -> None:
        """Never read earlier than a commit already in the store."""
        with self._lock:
            if self._last is None or seen > self._last:
                self._last = seen

    def peek(self) -> datetime:
        """The current reading without claiming it for a commit."""
        reading = self._reading()
        last = self._last
        return reading if last is None or reading > last else last

    def read(self) -> datetime:
        with self._lock:
            reading = self._reading()
            if self._last is not None and reading < self._last:
                reading = self._last
            self._last = reading
            return reading
