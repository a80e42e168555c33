"""`SortedCodes` and `CodeTable` (lineage ids as fixed-width bytes) answer as a dict of the same values would."""

from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_lakehouse import codes as codes_module
from memory_lakehouse.codes import ADDED_CODES, CodeTable, SortedCodes, _encoded, _fixed_width


@given(
    held=st.lists(st.text(max_size=12), unique=True, max_size=40),
    batches=st.lists(st.lists(st.text(max_size=40), unique=True, max_size=20), max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_sorted_codes_answer_as_a_dict_of_the_same_values(held, batches):
    """`SortedCodes` (the heads' lineage codes) give each value the code a dict would, one at
    a time or many at once, after additions too (a few waiting beside the sorted arrays, more
    sorted in: `ADDED_CODES`), for any text (a NUL at the end, longer values than any held)."""
    codes = SortedCodes.of(held)
    grown, everything, sorted_in = codes, list(held), False
    for batch in batches:
        more = [v for v in batch if v not in everything]
        before, grown = grown, grown.with_added(more)
        sorted_in |= len(grown.values) > len(before.values)
        everything += more
        assert len(before) == len(everything) - len(more)  # the cell it grew from keeps its codes
    as_dict = {v: i for i, v in enumerate(everything)}
    for value in [*everything, "absent", "", "\x00"]:
        assert grown.get(value) == as_dict.get(value)
        assert codes.get(value) == (as_dict[value] if value in held else None)  # the old codes are unchanged
    assert len(grown) == len(as_dict) and len(codes) == len(held)
    asked = [*everything[len(held) :], *held, "absent", "\x00"]
    assert grown.get_many(asked) == {v: as_dict[v] for v in asked if v in as_dict}  # one search for many
    assert codes.get_many(asked) == {v: as_dict[v] for v in asked if v in held}
    assert sorted_in == (len(everything) - len(held) > ADDED_CODES)  # waiting ones sorted in past the bound


@given(
    values=st.one_of(
        st.lists(st.text(max_size=8), unique=True, max_size=30),
        st.lists(st.text("0123456789abcdef", min_size=6, max_size=6), unique=True, max_size=30),  # ids of one length
    ),
    start=st.integers(0, 4),
    large=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_codes_read_from_the_arrow_buffers_are_the_values_encoded_one_by_one(values, start, large):
    """`SortedCodes.of` reads an Arrow array's buffers (a slice of one, large strings too) into
    the same fixed-width bytes as encoding each value with its terminator."""
    array = pa.array(values, pa.large_string() if large else pa.string())[start:]
    expected = [_encoded(v) for v in values[start:]]
    assert _fixed_width(array).tolist() == expected
    assert SortedCodes.of(array).get_many(values) == {v: i for i, v in enumerate(values[start:])}


def test_values_waiting_beside_the_sorted_codes_are_sorted_in_with_their_codes():
    """Past `ADDED_CODES` waiting values, `with_added` sorts them into the arrays: every value
    keeps the code it was given when added, whichever batch it came in."""
    held = [f"lin-{i:03d}" for i in range(0, 300, 3)]
    codes, everything = SortedCodes.of(held), list(held)
    for start in range(1, 3 * (ADDED_CODES + 20), 7):
        more = [f"lin-{i:03d}" for i in range(start, start + 5) if i % 3]
        codes = codes.with_added(more)
        everything += more
        assert codes.get_many(everything) == {v: i for i, v in enumerate(everything)}
    assert len(codes.values) > len(held)  # some were sorted in, some may wait


def test_a_value_longer_than_every_held_one_is_not_found_by_its_prefix():
    """Held values are fixed-width bytes: a longer one asked for must not match a held value
    its first bytes spell (``"a\\x01..."`` begins as ``"a"`` encoded does)."""
    codes = SortedCodes.of(["a", "b"])
    assert codes.get("a\x01b") is None and codes.get_many(["a\x01b", "b"]) == {"b": 1}


@given(
    batches=st.lists(
        st.one_of(
            st.lists(st.text(max_size=12), max_size=40),
            st.lists(st.text("0123456789abcdef", min_size=8, max_size=8), max_size=60),  # ids of one length
        ),
        max_size=8,
    ),
    asked=st.lists(st.text(max_size=14), max_size=20),
    one_by_one=st.sampled_from([0, 5, 10**6]),
    arrow=st.lists(st.booleans(), min_size=8, max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_a_code_table_answers_as_a_dict_of_the_same_values(batches, asked, one_by_one, arrow):
    """`CodeTable` (the writer's slot index; a partition's labels, a BM25 model's documents)
    gives each value the code a dict would, and each code its value back, after every batch
    added: the table grown and rehashed, values longer than any held before (the held bytes
    widened), values of one length read from the Arrow buffers, NULs; added as an Arrow
    array or a list; looked up and added in numpy, one at a time in Python, or either by
    size (`ONE_BY_ONE`)."""
    table = CodeTable()
    as_dict: dict[str, int] = {}
    with mock.patch.object(codes_module, "ONE_BY_ONE", one_by_one):
        for batch, as_arrow in zip(batches, arrow, strict=False):
            new = [v for v in dict.fromkeys(batch) if v not in as_dict]
            codes = table.add(pa.array(new, pa.string()) if as_arrow else new)
            assert codes.tolist() == list(range(len(as_dict), len(as_dict) + len(new)))
            as_dict.update((v, len(as_dict)) for v in new)
            values = [*batch, *asked, "\x00", ""]
            expected = [as_dict.get(v, -1) for v in values]
            assert table.find(pa.array(values, pa.string())).tolist() == expected
            assert table.find(values).tolist() == expected
            assert [v in table for v in values] == [v in as_dict for v in values]
            assert table.values_at(range(len(table))) == list(as_dict)
    assert len(table) == len(as_dict)
    assert CodeTable.of(list(as_dict)).find(list(as_dict)).tolist() == list(range(len(as_dict)))


def test_a_code_table_refuses_a_code_it_does_not_hold():
    """A code past the held ones (or -1, "not found") is an error, not numpy's wrap-around to the last value."""
    table = CodeTable.of(["a", "b"])
    assert table.values_at([1, 0]) == ["b", "a"] and table.values_at([]) == []
    for wrong in ([2], [-1], [0, 5]):
        with pytest.raises(IndexError):
            table.values_at(wrong)


def test_a_code_table_finds_every_one_of_many_values_after_it_grew_many_times():
    table, everything = CodeTable(), []
    for start in range(0, 20000, 1000):
        batch = [f"{i:032x}" for i in range(start, start + 1000)]
        table.add(pa.array(batch, pa.string()))
        everything += batch
    found = table.find(pa.array(everything + ["f" * 32], pa.string()))
    assert found.tolist() == [*range(len(everything)), -1]


def test_a_value_longer_than_every_one_in_a_code_table_is_not_found_by_its_prefix():
    """As `SortedCodes`: ``"a\\x01b"`` encoded begins with ``"a"`` encoded, at the held width."""
    table = CodeTable()
    table.add(pa.array(["a", "b"], pa.string()))
    assert table.find(pa.array(["a\x01b", "b", "a"], pa.string())).tolist() == [-1, 1, 0]


@given(
    batches=st.lists(st.lists(st.text(max_size=10), max_size=40), max_size=8),
    one_by_one=st.sampled_from([0, 5, 10**6]),
    arrow=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_numbering_a_batch_gives_held_values_their_codes_and_new_ones_the_next(batches, one_by_one, arrow):
    """`CodeTable.number` (a chunk's lineage ids, `slots.SlotRows.extend`) answers as a dict
    that adds each value it has not seen, in the batch's order."""
    table = CodeTable()
    as_dict: dict[str, int] = {}
    with mock.patch.object(codes_module, "ONE_BY_ONE", one_by_one):
        for batch in batches:
            distinct = list(dict.fromkeys(batch))
            got = table.number(pa.array(distinct, pa.string()) if arrow else distinct)
            for v in distinct:
                as_dict.setdefault(v, len(as_dict))
            assert got.tolist() == [as_dict[v] for v in distinct]
    assert len(table) == len(as_dict)
