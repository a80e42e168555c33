"""`arrow_rule.evaluate` gives a SQL conjunction the value DuckDB gives it, row by row, nulls included.

The write path asks `query.SLOT_VERSION_RULES` of a batch's slot rows in Arrow when the
ledger is empty and no retraction is among them (`Visibility._turned_away`); the rule's
SQL text stays its one definition, so the evaluation must agree with DuckDB on every row,
and must step aside (None) for any term it does not know.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_lakehouse import arrow_rule
from memory_lakehouse.query import SLOT_VERSION_RULES

T = datetime(2026, 1, 1, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")

rows = st.lists(
    st.fixed_dictionaries(
        {
            "known_since": st.none() | st.just(T),
            "hidden": st.none() | st.booleans(),
            "status": st.none() | st.sampled_from(["active", "proposed", "retracted", "it's"]),
            "retracted_since": st.none() | st.just(T),
        }
    ),
    max_size=12,
)

RULES = [
    SLOT_VERSION_RULES,
    "status = 'active'",
    "NOT hidden AND known_since IS NULL",
    "status = 'it''s' AND retracted_since IS NOT NULL",
]


def _table(values: list[dict[str, object]]) -> pa.Table:
    schema = pa.schema([("known_since", TS), ("hidden", pa.bool_()), ("status", pa.string()), ("retracted_since", TS)])
    return pa.Table.from_pylist(values, schema=schema)


def _duckdb(rule: str, table: pa.Table) -> list[bool | None]:
    con = duckdb.connect()
    con.register("t", table)
    answer = con.sql(f"SELECT ({rule}) AS v FROM t").to_arrow_table()
    con.close()
    return answer.column("v").to_pylist()


@settings(max_examples=60, deadline=None)
@given(values=rows, rule=st.sampled_from(RULES))
def test_a_conjunction_of_column_tests_has_the_value_duckdb_gives_it(values, rule):
    table = _table(values)
    value = arrow_rule.evaluate(rule, table)
    assert value is not None
    assert value.to_pylist() == _duckdb(rule, table)


@pytest.mark.parametrize(
    "rule",
    [
        "status = 'active' OR known_since IS NULL",  # not a conjunction
        "status <> 'active'",  # a test it does not know
        "(known_since IS NOT NULL)",
        "NOT status",  # NOT of a column that is not boolean
        "missing IS NULL",  # a column the rows lack
        "status = 'a AND b'",  # split on its text: the halves are no tests
        "",
    ],
)
def test_a_rule_it_cannot_read_is_left_to_sql(rule):
    assert arrow_rule.evaluate(rule, _table([{"known_since": T, "hidden": False, "status": "active"}])) is None
