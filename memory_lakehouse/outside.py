"""Tables outside engines read right: the visibility rules as plain SQL, and snapshot exports.

The tables are standard Delta, so polars, DuckDB, Spark or Daft can open them; what
they lack is our rules. A memory table holds every version ever written (superseded,
retracted, proposed, forgotten-not-yet-purged rows all still say what they said when
written), and a row's system time is its transaction's commit, which lives in the
commit log and — for outside engines — in ``_commits`` (`commitlog`).

`VISIBILITY_SQL` is those rules for a reader outside the library, over three inputs
named ``rows`` (one memory table), ``commits`` (``_commits``) and ``ledger``
(``_ledger``). It is the same rule list as `query.visibility_sql`, spelled without the
library's derived columns; docs/outside-engines.md quotes it verbatim (a test checks
that) and `tests/test_outside_engines.py` runs it over tables polars read and checks it
returns exactly the rows the store serves, now and at past bases.

`export` writes a snapshot (the rows a principal is served at a basis, with their
system time) as Parquet, through the library's one visibility query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import ValidationError
from .records import check_kinds
from .scope import Principal
from .time import Basis

if TYPE_CHECKING:
    from .query import Visibility

#: The visibility rules for an outside engine (DuckDB dialect). Parameters: ``$kind`` (the
#: memory table's name), ``$known_at`` and ``$valid_at`` (UTC timestamps: "now" is both set
#: to the current time), ``$org``, ``$division``, ``$team``, ``$actor`` (the reader's scope,
#: NULL below its level). One row per slot the reader is served.
VISIBILITY_SQL = """
WITH memory_commits AS (      -- system time: only memory commits teach the store anything
    SELECT "table", version, txn_id, committed_at, kinds FROM commits
    WHERE operation IN ('write', 'propose', 'approve', 'retract')
),
transactions AS (             -- known once every table the transaction wrote to has its commit
    SELECT txn_id, max(committed_at) AS known_since FROM memory_commits
    GROUP BY txn_id HAVING count(DISTINCT "table") = max(len(kinds))
),
known AS (
    SELECT r.*, t.known_since, c.version AS commit_version,
           CASE WHEN r.actor IS NOT NULL
                THEN sha256('memlake-subject' || chr(0) || lower(trim(r.actor))) END AS actor_key,
           CASE WHEN r.actor IS NOT NULL THEN 4 WHEN r.team IS NOT NULL THEN 3
                WHEN r.division IS NOT NULL THEN 2 ELSE 1 END AS scope_depth
    FROM rows r
    JOIN transactions t ON t.txn_id = r.txn_id
    JOIN memory_commits c ON c.txn_id = r.txn_id AND c."table" = $kind
),
tombstones AS (               -- forgotten subjects, inside the steward's subtree
    SELECT subject_key AS key, generation, "at" AS forgotten_at,
           nullif(split_part(scope, '/', 1), '') AS org,
           nullif(split_part(scope, '/', 2), '') AS division,
           nullif(split_part(scope, '/', 3), '') AS team
    FROM ledger WHERE op = 'forget'
),
forgotten_records AS (SELECT DISTINCT unnest(record_ids) AS record_id FROM ledger WHERE op = 'forget'),
retractions AS (              -- when each retraction became known, in its own org
    SELECT org, supersedes AS record_id, min(known_since) AS retracted_since FROM known
    WHERE status = 'retracted' AND supersedes IS NOT NULL GROUP BY org, supersedes
),
candidates AS (
    SELECT k.* FROM known k LEFT JOIN retractions x ON x.record_id = k.record_id AND x.org = k.org
    WHERE k.status = 'active'                                    -- no proposals, no retraction rows
      AND k.org = $org                                           -- scope: own and ancestors' only
      AND (k.division IS NULL OR k.division = $division)
      AND (k.team IS NULL OR k.team = $team)
      AND (k.actor IS NULL OR k.actor = $actor)
      AND k.known_since <= $known_at                             -- system time
      AND (x.retracted_since IS NULL OR x.retracted_since > $known_at)
      AND k.valid_from <= $valid_at                              -- world time: begun
      AND NOT EXISTS (SELECT 1 FROM tombstones f
                      WHERE ((f.key = k.subject_key AND k.generation < f.generation)
                             OR (f.key = k.actor_key AND k.known_since <= f.forgotten_at))
                        AND (f.org IS NULL OR f.org = k.org)
                        AND (f.division IS NULL OR f.division = k.division)
                        AND (f.team IS NULL OR f.team = k.team))
      AND k.record_id NOT IN (SELECT record_id FROM forgotten_records)
      AND NOT list_has_any(coalesce(k.derived_from, []),
                           (SELECT coalesce(list(record_id), []) FROM forgotten_records))
),
heads AS (                    -- per slot and scope: latest valid_from, then the later commit
    SELECT c.* FROM candidates c
    QUALIFY row_number() OVER (
        PARTITION BY lineage_id, scope_depth
        ORDER BY valid_from DESC, known_since DESC, commit_version DESC,
                 -- one batch writing a slot twice at one valid_from: its later row (which supersedes the other) wins
                 EXISTS (SELECT 1 FROM candidates p WHERE p.supersedes = c.record_id AND p.txn_id = c.txn_id)) = 1
)
SELECT * EXCLUDE (actor_key) FROM heads
WHERE (valid_to IS NULL OR valid_to > $valid_at)                 -- the head has not ended
  AND (expires_at IS NULL OR expires_at > $valid_at)             -- nor expired
QUALIFY row_number() OVER (PARTITION BY lineage_id ORDER BY scope_depth DESC) = 1  -- most specific scope wins
ORDER BY valid_from DESC, known_since DESC
"""


def visibility_params(kind: str, principal: Principal, basis: Basis) -> dict[str, Any]:
    """The parameters of `VISIBILITY_SQL` for one reader at one basis."""
    s = principal.scope
    return {
        "kind": kind,
        "known_at": basis.known_at,
        "valid_at": basis.valid_at,
        "org": s.org,
        "division": s.division,
        "team": s.team,
        "actor": s.actor,
    }


@dataclass(frozen=True)
class ExportReport:
    """What `export` wrote: one Parquet file per kind, and how many rows each holds."""

    path: str
    basis: Basis
    files: dict[str, str]
    rows: dict[str, int]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "known_at": self.basis.known_at.isoformat(),
            "valid_at": self.basis.valid_at.isoformat(),
            "files": self.files,
            "rows": self.rows,
            "seconds": self.seconds,
        }

    def summary(self) -> list[str]:
        return [f"exported {n} {kind} row(s) to {self.files[kind]}" for kind, n in self.rows.items()] + [
            f"basis: {self.basis.describe()}"
        ]


def export(
    vis: Visibility,
    principal: Principal,
    basis: Basis,
    path: str | Path,
    *,
    kinds: Sequence[str] | None = None,
    format: str = "parquet",
) -> ExportReport:
    """Write the rows *principal* is served at *basis*, per kind, with their system time, as Parquet.

    The rows come from the one visibility query (`query.Visibility.rows`), so a snapshot
    holds exactly what a read at that basis returns: one head per slot, no superseded,
    retracted, proposed or forgotten row, ``known_since`` and ``commit_version`` as columns.
    """
    if format != "parquet":
        raise ValidationError(f"unknown export format {format!r}; supported: parquet", field="format")
    started = time.perf_counter()
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    files, counts = {}, {}
    for kind in check_kinds(kinds):
        rows: pa.Table = vis.rows(kind, principal, basis)
        target = out / f"{kind}.parquet"
        pq.write_table(rows, target)
        files[kind], counts[kind] = str(target), rows.num_rows
    return ExportReport(str(out), basis, files, counts, round(time.perf_counter() - started, 3))
