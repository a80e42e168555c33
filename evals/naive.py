"""The naive baseline: a plain vector-store memory, the one the seeds warn about.

Every row written is embedded (with the same embedder as the store under test) and
kept. A search is a cosine top-k over the rows of one tenant (``org``, the namespace
a vector store gives each customer), narrowed by exact metadata filters (entity,
kind, any payload field) the way a vector database's ``where`` clause narrows. It has:

- no time axis: it never asks when a row was learned or when it was true (it keeps
  ``ingested_at`` and ``event_time`` only so an eval can *score* what it served);
- no supersession: every version of a slot is a row like any other;
- no scope precedence: within a tenant, every team's and every actor's rows are one pool;
- no tombstones: ``delete(entity)`` removes the rows that name the entity today, and
  nothing stops a later write (a re-run backfill, a restored backup) bringing them back.

It imports nothing of memory_lakehouse: none of the library's rules can leak into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np


@dataclass(frozen=True)
class NaiveItem:
    """One row of the naive memory: text, entity, tenant and whatever metadata came with it."""

    record_id: str
    kind: str
    text: str
    entity: str
    org: str
    scope: str
    source: str
    evidence: str | None
    event_time: datetime
    ingested_at: datetime
    label: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NaiveHit:
    item: NaiveItem
    score: float


class NaiveMemory:
    """A list of rows and their vectors; cosine top-k with metadata filters."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.items: list[NaiveItem] = []
        self._vectors = np.zeros((0, int(embedder.dim)), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, items: Sequence[NaiveItem]) -> None:
        if not items:
            return
        vectors = np.asarray(self.embedder.embed([i.text for i in items]), dtype=np.float32)
        self.items.extend(items)
        self._vectors = np.vstack([self._vectors, vectors])

    def search(
        self,
        query: str,
        *,
        org: str,
        entity: str | None = None,
        k: int = 8,
        kinds: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[NaiveHit]:
        """The top *k* rows by cosine among the tenant's rows that pass the filters."""
        keep = [
            n
            for n, item in enumerate(self.items)
            if item.org == org
            and (entity is None or item.entity == entity)
            and (kinds is None or item.kind in kinds)
            and all(item.payload.get(key, getattr(item, key, None)) == value for key, value in (where or {}).items())
        ]
        if not keep:
            return []
        q = np.asarray(self.embedder.embed([query]), dtype=np.float32)[0]
        scores = self._vectors[keep] @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [NaiveHit(self.items[keep[i]], float(scores[i])) for i in order]

    def delete(self, entity: str) -> int:
        """``DELETE WHERE entity = ?``: the rows that name the entity go; nothing remembers they did."""
        keep = [n for n, item in enumerate(self.items) if item.entity != entity]
        gone = len(self.items) - len(keep)
        self.items = [self.items[n] for n in keep]
        self._vectors = self._vectors[keep]
        return gone

    def snapshot(self) -> NaiveMemory:
        """A backup: a copy of every row as it is now."""
        other = NaiveMemory(self.embedder)
        other.items = list(self.items)
        other._vectors = self._vectors.copy()
        return other

    def dump_text(self) -> str:
        """Every byte the memory holds, as text (what a scan for erased content reads)."""
        return "\n".join(f"{i.text}\x1f{i.entity}\x1f{i.evidence}" for i in self.items)
