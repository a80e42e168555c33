"""Recall: filter by visibility, then rank, then budget.

The visibility query decides what may be returned; ranking only orders it. Lexical
ranking is BM25 (bm25s) over the visible candidates; each hit says why it is there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional, Sequence

import numpy as np
import pyarrow as pa

from .query import Visibility
from .records import Envelope, record_from_row
from .scope import Principal
from .time import Basis


@dataclass(frozen=True)
class Hit:
    """One recalled memory, with its score and the reasons it was returned."""

    record: Envelope
    score: float
    why: tuple[str, ...]
    kind: str
    text: str

    @property
    def record_id(self) -> str:
        return self.record.record_id or ""


def _tokens(texts: Sequence[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


def lexical_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 score of *query* against each of *texts* (zeros when nothing matches)."""
    import bm25s

    if not texts:
        return np.zeros(0, dtype=np.float32)
    corpus = _tokens(texts)
    if not any(corpus):
        return np.zeros(len(texts), dtype=np.float32)
    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    q = _tokens([query])[0]
    known = [t for t in q if t in model.vocab_dict]
    if not known:
        return np.zeros(len(texts), dtype=np.float32)
    return np.asarray(model.get_scores(known), dtype=np.float32)


def describe_why(row: dict[str, Any], signal: str) -> tuple[str, ...]:
    why = [f"scope {row['org']}" + "".join(f"/{row[l]}" for l in ('division', 'team', 'actor') if row[l]),
           signal]
    if row.get("supersedes"):
        why.append(f"supersedes {row['supersedes']}" + (f" ({row['reason']})" if row.get("reason") else ""))
    return tuple(why)


def recall_lexical(vis: Visibility, query: str, principal: Principal, basis: Basis, *, kinds: Sequence[str],
                   subject: Optional[str], k: int, filters: Optional[dict]) -> list[Hit]:
    rows: list[tuple[str, dict]] = []
    for kind in kinds:
        table = vis.rows(kind, principal, basis, subject=subject,
                         filters={c: v for c, v in (filters or {}).items()
                                  if c in vis.lake.known_rows(kind).schema.names})
        rows.extend((kind, r) for r in table.to_pylist())
    if not rows:
        return []
    scores = lexical_scores(query, [r["search_text"] for _, r in rows])
    order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), -rows[i][1]["valid_from"].timestamp()))
    hits = []
    for i in order[:k]:
        kind, row = rows[i]
        signal = f"bm25 {scores[i]:.2f}" if scores[i] > 0 else "no term match; recent in scope"
        hits.append(Hit(record_from_row(kind, row), float(scores[i]), describe_why(row, signal), kind, row["search_text"]))
    return hits


def _version_key(version: str) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"\d+|[A-Za-z]+", version))


def version_in_range(version: str, version_from: Optional[str], version_to: Optional[str]) -> bool:
    """Whether *version* lies in [version_from, version_to] (numeric-aware: v2.10 > v2.9)."""
    key = _version_key(version)
    if version_from is not None and key < _version_key(version_from):
        return False
    if version_to is not None and key > _version_key(version_to):
        return False
    return True
