"""The column helpers the lake builds each chunk it takes in with (`objectstore.conform`, `lake._per_value`)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from memory_lakehouse.lake import _per_value
from memory_lakehouse.objectstore import conform


@given(
    st.lists(st.sampled_from(["t1", "t2", "t3", None]), max_size=12),
    st.fixed_dictionaries({t: st.one_of(st.none(), st.integers(0, 9)) for t in ("t1", "t2", "t3")}),
    st.integers(0, 6),
)
def test_per_value_gives_each_row_the_value_of_its_entry_asking_once_per_distinct_value(column, values, cut):
    cut = min(cut, len(column))
    chunked = pa.chunked_array([pa.array(column[:cut], pa.string()), pa.array(column[cut:], pa.string())])
    asked: list[str] = []

    def value_of(v: str) -> int | None:
        asked.append(v)
        return values[v]

    got = _per_value(chunked, value_of, pa.int64())
    assert got.type == pa.int64()
    assert got.to_pylist() == [values[v] if v is not None else None for v in column]
    assert sorted(asked) == sorted({v for v in column if v is not None})


def test_conform_orders_and_casts_columns_only_where_the_types_differ():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    matching = pa.table({"b": ["x"], "a": pa.array([1], pa.int64()), "extra": [0]})
    assert conform(matching, schema).schema.equals(schema)
    narrower = pa.table({"a": pa.array([1], pa.int32()), "b": ["x"]})
    out = conform(narrower, schema)
    assert out.schema.equals(schema) and out.to_pylist() == [{"a": 1, "b": "x"}]
