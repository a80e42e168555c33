"""`SlotRows` finds a slot's rows where a scan of the lineage column finds them.

The write path's reconcile reads every stored version of a batch's slots through it
(`lake.Lake.slot_positions`), so for any sequence of appended chunks (a slot's versions
spread over them, repeated within one) its positions must be exactly the rows whose
lineage id is asked for, in ascending order, and its membership the ids with a row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_lakehouse.slots import SlotRows

ids = st.sampled_from([f"fact:{i:02d}" for i in range(12)] + ["", "fact:\x00", "fäct:é"])
chunks = st.lists(st.lists(ids, min_size=0, max_size=9), max_size=7)


@settings(max_examples=200, deadline=None)
@given(chunks=chunks, asked=st.lists(ids, max_size=6), chunked=st.booleans())
def test_positions_are_the_rows_a_scan_of_the_lineage_column_finds(chunks, asked, chunked):
    slots = SlotRows()
    for chunk in chunks:
        column = pa.array(chunk, pa.string())
        slots.extend(pa.chunked_array([column[: len(chunk) // 2], column[len(chunk) // 2 :]]) if chunked else column)
    everything = pa.array([rid for chunk in chunks for rid in chunk], pa.string())
    scanned = pc.indices_nonzero(pc.is_in(everything, value_set=pa.array(asked, pa.string()))).to_numpy()
    assert slots.positions(asked).tolist() == scanned.tolist()
    assert slots.rows == len(everything)
    assert len(slots) == len(set(everything.to_pylist()))
    assert slots.held(asked) == set(asked) & set(everything.to_pylist())
    assert all((rid in slots) == (rid in set(everything.to_pylist())) for rid in asked)


def test_a_slot_written_in_every_chunk_lists_each_of_its_rows_once():
    slots = SlotRows()
    for _ in range(50):
        slots.extend(pa.array(["a", "b", "a"]))
    assert slots.positions(["a"]).tolist() == [i for i in range(150) if i % 3 != 1]
    assert slots.positions(["a", "a", "missing"]).dtype == np.int64
