"""The context block handed to a model: its text, and the items it was built from.

`Context` is a ``str`` (the prompt text, as `store.context` always returned), so
``print(ctx)``, ``"x" in ctx`` and string methods keep working; ``ctx.items`` lists
what went in, each with the provenance an agent needs to cite it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ContextItem:
    """One memory in a context block, in the order it was printed."""

    record_id: str
    kind: str
    text: str
    source: str
    evidence: str | None
    valid_from: datetime | None
    valid_to: datetime | None
    scope: str | None
    score: float
    line: str  # the line of the block that carries it

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_id": self.record_id,
            "kind": self.kind,
            "text": self.text,
            "source": self.source,
            "evidence": self.evidence,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "scope": self.scope,
            "score": self.score,
        }


class Context(str):
    """A prompt block (this string) and the `ContextItem`s it holds (``.items``).

    >>> ctx = Context("Memory:\\n- user:42 plan: Pro [fact]", ())
    >>> "Pro" in ctx, ctx.text == str(ctx), ctx.items
    (True, True, ())
    """

    items: tuple[ContextItem, ...]

    def __new__(cls, text: str, items: Sequence[ContextItem] = ()) -> Context:
        obj = super().__new__(cls, text)
        obj.items = tuple(items)
        return obj

    @property
    def text(self) -> str:
        return str.__str__(self)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "items": [i.to_dict() for i in self.items]}
