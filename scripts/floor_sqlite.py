"""The hand-written floor for `memlake bench --workload tenants`: SQLite + numpy.

What a user writes in an afternoon: one SQLite table of facts with their scope, valid and
known times; on ingest, a newer version of a slot closes the older one's known interval
(``superseded_at``) in the same transaction; a search selects the rows a principal may
see at a basis in SQL (own scope and ancestors, known then, not yet superseded then,
valid then) and scores their vectors with one numpy product. The vectors are the
bench's (the same hashing embedder), kept per org in memory.

It does less than the store (no ledger, no redaction, no per-slot most-specific-scope
rule, no retraction, no audit): it is a floor, not a competitor. Lives in scripts/, not
the library; the bench loads it by path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np


def _us(t: datetime | None) -> int | None:
    return None if t is None else int(t.timestamp() * 1_000_000)


class Floor:
    """SQLite rows + per-org numpy vectors."""

    def __init__(self, path: str = ":memory:") -> None:
        self.db = sqlite3.connect(path)
        self.db.executescript("""
CREATE TABLE facts (
  id INTEGER PRIMARY KEY, org TEXT NOT NULL, team TEXT, actor TEXT,
  subject TEXT NOT NULL, attribute TEXT NOT NULL, value TEXT NOT NULL, text TEXT NOT NULL,
  valid_from INTEGER NOT NULL, known_since INTEGER NOT NULL, superseded_at INTEGER, vec INTEGER NOT NULL);
CREATE INDEX facts_read ON facts(org, team, actor);
CREATE INDEX facts_slot ON facts(org, subject, attribute, team, actor);
""")
        self.vectors: dict[str, list[np.ndarray]] = {}
        self.matrix: dict[str, np.ndarray] = {}

    def ingest(self, rows: Sequence[dict[str, Any]], vectors: np.ndarray, known_at: datetime) -> None:
        """One transaction: insert the rows, close the known interval of the versions they replace."""
        known = _us(known_at)
        cur = self.db.cursor()
        with self.db:
            for row, vec in zip(rows, vectors, strict=True):
                org = row["org"]
                part = self.vectors.setdefault(org, [])
                cur.execute(
                    "UPDATE facts SET superseded_at = ? WHERE org = ? AND subject = ? AND attribute = ? "
                    "AND team IS ? AND actor IS ? AND superseded_at IS NULL AND valid_from <= ?",
                    (known, org, row["subject"], row["attribute"], row["team"], row["actor"], _us(row["valid_from"])),
                )
                cur.execute(
                    "INSERT INTO facts (org, team, actor, subject, attribute, value, text, valid_from, "
                    "known_since, vec) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        org,
                        row["team"],
                        row["actor"],
                        row["subject"],
                        row["attribute"],
                        row["value"],
                        row["text"],
                        _us(row["valid_from"]),
                        known,
                        len(part),
                    ),
                )
                part.append(vec.astype(np.float32))
                self.matrix.pop(org, None)

    def _matrix(self, org: str) -> np.ndarray:
        m = self.matrix.get(org)
        if m is None:
            m = self.matrix[org] = np.vstack(self.vectors[org])
        return m

    def search(self, qvec: np.ndarray, *, org: str, team: str, actor: str, at: datetime, k: int = 8) -> list[int]:
        """Ids of the k best rows the actor may see at *at* (system and world time alike)."""
        t = _us(at)
        hits = self.db.execute(
            "SELECT id, vec FROM facts WHERE org = ? AND (team IS NULL OR team = ?) AND (actor IS NULL OR actor = ?) "
            "AND known_since <= ? AND (superseded_at IS NULL OR superseded_at > ?) AND valid_from <= ?",
            (org, team, actor, t, t, t),
        ).fetchall()
        if not hits:
            return []
        ids = np.fromiter((h[0] for h in hits), dtype=np.int64, count=len(hits))
        pos = np.fromiter((h[1] for h in hits), dtype=np.int64, count=len(hits))
        scores = self._matrix(org)[pos] @ qvec
        top = np.argsort(-scores)[:k]
        return ids[top].tolist()

    def get(self, *, org: str, team: str, actor: str, subject: str, attribute: str, at: datetime) -> str | None:
        t = _us(at)
        row = self.db.execute(
            "SELECT value FROM facts WHERE org = ? AND subject = ? AND attribute = ? AND (team IS NULL OR team = ?) "
            "AND (actor IS NULL OR actor = ?) AND known_since <= ? AND (superseded_at IS NULL OR superseded_at > ?) "
            "AND valid_from <= ? ORDER BY (actor IS NOT NULL) DESC, (team IS NOT NULL) DESC, valid_from DESC LIMIT 1",
            (org, subject, attribute, team, actor, t, t, t),
        ).fetchone()
        return None if row is None else row[0]
