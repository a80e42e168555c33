"""The hand-written floor for `memlake bench --workload tenants`: SQLite + numpy.

What a user writes in an afternoon: one SQLite table of facts with their scope, valid and
known times; on ingest, a newer version of a slot closes the older one's known interval
(``superseded_at``) in the same transaction; a search selects the rows a principal may
see at a basis (own scope and ancestors, known then, not yet superseded then, valid
then) and scores their vectors with one numpy product. The vectors are the bench's (the
same hashing embedder), kept per org in memory.

The search reads each org's rows once into numpy columns (team and actor as codes, the
three instants) and answers with boolean masks. A first version asked SQLite per search;
its ``(team IS NULL OR team = ?)`` left the index at the org, so each search scanned the
org's 5k rows (~1-6 ms at 100k) and made the floor slower than the store, which a
hand-written floor should not be. The dot product is the library's (`np.vecdot`, one
thread): ``rows @ q`` wakes OpenBLAS threads, which on a busy 2-core machine cost the
floor several ms a search, and the comparison is of the designs, not of that.

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
        self.columns: dict[str, dict[str, Any]] = {}  # per org, read from SQLite at its first search after ingest

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
                self.columns.pop(org, None)

    def _matrix(self, org: str) -> np.ndarray:
        m = self.matrix.get(org)
        if m is None:
            m = self.matrix[org] = np.vstack(self.vectors[org])
        return m

    def _columns(self, org: str) -> dict[str, Any]:
        cols = self.columns.get(org)
        if cols is None:
            rows = self.db.execute(
                "SELECT id, team, actor, known_since, superseded_at, valid_from, vec FROM facts WHERE org = ?", (org,)
            ).fetchall()
            codes: dict[str | None, int] = {None: -1}
            never = np.iinfo(np.int64).max
            cols = self.columns[org] = {
                "id": np.array([r[0] for r in rows], np.int64),
                "team": np.array([codes.setdefault(r[1], len(codes)) for r in rows], np.int64),
                "actor": np.array([codes.setdefault(r[2], len(codes)) for r in rows], np.int64),
                "known": np.array([r[3] for r in rows], np.int64),
                "until": np.array([never if r[4] is None else r[4] for r in rows], np.int64),
                "valid": np.array([r[5] for r in rows], np.int64),
                "vec": np.array([r[6] for r in rows], np.int64),
                "codes": codes,
            }
        return cols

    def search(self, qvec: np.ndarray, *, org: str, team: str, actor: str, at: datetime, k: int = 8) -> list[int]:
        """Ids of the k best rows the actor may see at *at* (system and world time alike)."""
        t = _us(at)
        c = self._columns(org)
        if not len(c["id"]):
            return []
        team_code, actor_code = c["codes"].get(team, -2), c["codes"].get(actor, -2)
        seen = (
            ((c["team"] == -1) | (c["team"] == team_code))
            & ((c["actor"] == -1) | (c["actor"] == actor_code))
            & (c["known"] <= t)
            & (c["until"] > t)
            & (c["valid"] <= t)
        )
        ids, pos = c["id"][seen], c["vec"][seen]
        if not len(ids):
            return []
        scores = np.vecdot(self._matrix(org)[pos], qvec)
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
