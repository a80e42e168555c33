"""The lake's warm snapshot is held once: combining its chunks, or listing the known rows,
makes no second copy of the rows (at 100k facts each copy was 45 MB); the DuckDB mirror
beside it is compressed."""

from datetime import UTC, datetime

import pyarrow as pa
from _support import present

import memory_lakehouse as ml
from memory_lakehouse.query import bases_table

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _buffers(table: pa.Table) -> set[int]:
    return {b.address for col in table.columns for arr in col.chunks for b in arr.buffers() if b is not None}


def test_combined_rows_and_the_appended_chunks_share_one_copy(tmp_path):
    store = ml.open(tmp_path / "s", clock=lambda: T0.replace(month=2), embedder=ml.HashingEmbedder())
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    for i in range(12):  # one commit, one chunk each: reads combine them
        store.write(ml.Fact(f"user:{i}", "plan", f"plan {i}", T0, source="chat"), by=ann)
        assert present(store.get_fact(f"user:{i}", "plan", by=ann)).value == f"plan {i}"
    lake = store.lake
    rows = lake.all_rows("fact")
    chunks = lake.appended("fact")[1]
    assert rows.num_rows == 12 and rows.column(0).num_chunks < len(chunks)
    offset = 0
    for chunk in chunks:  # the mirror and the caches read these: the same rows, the same buffers
        assert chunk.equals(rows.slice(offset, chunk.num_rows))
        assert _buffers(chunk) <= _buffers(rows)
        offset += chunk.num_rows
    assert offset == rows.num_rows
    known = lake.known_rows("fact")  # every row is known: no filtered copy
    assert known.num_rows == 12 and _buffers(known) <= _buffers(rows)
    assert [v.record_id for v in store.history("user:3", "plan", by=ann)] == rows.column("record_id").to_pylist()[3:4]


def test_the_duckdb_mirror_of_a_kind_is_stored_compressed_and_answers_as_before(tmp_path):
    """The first copy of a kind into DuckDB is compressed at once (a checkpoint of the mirror's
    catalog), not left plain until some later statement; rows the mirror takes in later are
    read with it."""
    store = ml.open(tmp_path / "s", clock=lambda: T0.replace(month=2), embedder=ml.HashingEmbedder())
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    for i in range(40):
        store.write(ml.Fact(f"user:{i}", "plan", f"plan {i}", T0, source="chat"), by=ann)
    basis = ml.Basis(T0.replace(month=2), T0.replace(month=2))
    reads = bases_table([(name, ann, basis, None) for name in ("first", "second")])  # many bases: over the mirror
    assert store.vis.visible("fact", reads).num_rows == 2 * 40
    storage = store.vis.con.execute("SELECT column_name, compression FROM pragma_storage_info('rows_fact')").fetchall()
    org = {compression for column, compression in storage if column == "org"}
    assert org and "Uncompressed" not in org  # one org in every row: a constant, not 40 strings
    store.write(ml.Fact("user:40", "plan", "plan 40", T0, source="chat"), by=ann)
    assert store.vis.visible("fact", reads).num_rows == 2 * 41
