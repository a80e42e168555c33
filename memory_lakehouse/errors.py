"""One error hierarchy for the whole library.

    LakehouseError
     ├── ValidationError   (also ValueError)      bad input; nothing was written
     ├── PermissionDenied  (also PermissionError) the principal's role or scope forbids it
     ├── StaleGeneration                          a worker's deletion generation is out of date,
     │                                            or the record is history a forget erased
     ├── Escalation                               the policy resolver found a tie; a human decides
     ├── ConflictError                            a concurrent change won; retry
     └── StoreError        (also OSError)         the store's files are missing or unreadable

Every public call raises one of these (or lets a programming error through); the CLI
prints them as one line and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class LakehouseError(Exception):
    """Base of every error the library raises on purpose."""


class ValidationError(LakehouseError, ValueError):
    """A record or argument is malformed; the message names the field.

    In a batch, ``index`` is the position of the bad record and the message starts
    with it (``records[2999]: valid_from is required``); ``detail`` is the message
    without that prefix, for callers that name the record their own way (the CLI
    says which input line).
    """

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None) -> None:
        super().__init__(message if index is None else f"records[{index}]: {message}")
        self.field = field
        self.index = index
        self.detail = message

    def at(self, index: int, *, prefix: bool = True) -> ValidationError:
        """The same error located at record *index* of a batch (named in the message if *prefix*)."""
        located = ValidationError(self.detail, field=self.field, index=index if prefix else None)
        located.index = index
        return located


class PermissionDenied(LakehouseError, PermissionError):
    """The principal may not do this at this scope."""


class StaleGeneration(LakehouseError):
    """The subject was forgotten after the worker read its generation: drop the result."""

    def __init__(self, subject_key: str, expected: int, current: int, message: str | None = None) -> None:
        super().__init__(
            message
            or (
                f"deletion generation is {current}, the write carried {expected}: "
                "the subject was forgotten since this work started; its result is discarded"
            )
        )
        self.subject_key = subject_key
        self.expected = expected
        self.current = current


class Escalation(LakehouseError):
    """Two or more policies tie under every precedence rule: a person must decide."""

    def __init__(self, message: str, candidates: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


class ConflictError(LakehouseError):
    """A concurrent writer changed the same files; the operation can be retried."""


class StoreError(LakehouseError, OSError):
    """The store cannot be opened or read (missing files, wrong layout)."""


__all__ = [
    "LakehouseError",
    "ValidationError",
    "PermissionDenied",
    "StaleGeneration",
    "Escalation",
    "ConflictError",
    "StoreError",
]
