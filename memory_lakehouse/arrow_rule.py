"""A rule written in SQL, evaluated over Arrow rows in-process when it is a plain conjunction.

DuckDB costs a few milliseconds a query here whatever its size, and some rules are asked
of a few hundred rows on every write: `query.SLOT_VERSION_RULES`, which the write path's
reconcile asks of the rows of a batch's slots (~3 ms of DuckDB; ~0.15 ms in Arrow for the
264 rows of 200 slots at 100k). Such a
rule is a conjunction of column tests, and `evaluate` reads its SQL text, term by term,
into Arrow compute calls with SQL's three-valued logic. So the SQL text stays the one
definition: a term that is not one of the few column tests below makes `evaluate` answer
None, and the caller asks DuckDB. tests/test_arrow_rule.py checks it against DuckDB.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

_Test = Callable[[pa.Table, re.Match[str]], pa.ChunkedArray]

#: The column tests `evaluate` knows: each term's pattern, whether its column must be
#: boolean, and its value as SQL gives it (null where SQL's is).
_TESTS: tuple[tuple[re.Pattern[str], bool, _Test], ...] = (
    (re.compile(r"(\w+) IS NOT NULL"), False, lambda t, m: pc.is_valid(t.column(m[1]))),
    (re.compile(r"(\w+) IS NULL"), False, lambda t, m: pc.is_null(t.column(m[1]))),
    (re.compile(r"NOT (\w+)"), True, lambda t, m: pc.invert(t.column(m[1]))),
    (
        re.compile(r"(\w+) = '((?:[^']|'')*)'"),
        False,
        lambda t, m: pc.equal(t.column(m[1]), pa.scalar(m[2].replace("''", "'"), t.schema.field(m[1]).type)),
    ),
)


def evaluate(rule: str, table: pa.Table) -> pa.ChunkedArray | None:
    """The value of *rule* (``term AND term ...``) on each row of *table*: true, false or null, as SQL's.

    None when a term is not a test this module knows (``col IS [NOT] NULL``, ``NOT col``
    on a boolean column, ``col = 'text'``) or names a column *table* lacks: the caller
    then runs the rule as SQL.
    """
    value: pa.ChunkedArray | None = None
    for term in rule.split(" AND "):
        known = [(boolean, test, m) for pattern, boolean, test in _TESTS if (m := pattern.fullmatch(term.strip()))]
        if not known:
            return None
        boolean, test, match = known[0]
        if match[1] not in table.column_names:
            return None
        if boolean and not pa.types.is_boolean(table.schema.field(match[1]).type):
            return None
        tested = test(table, match)
        value = tested if value is None else pc.and_kleene(value, tested)
    return value
