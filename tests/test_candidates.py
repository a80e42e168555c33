"""`candidates.RowsView`: a pool's rows located one by one answer as each located alone."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_lakehouse.candidates import PositionHints, RowsView

_NONE = np.empty(0, dtype=np.int64)


@given(data=st.data())
@settings(max_examples=200, deadline=None)
def test_locating_a_pool_row_by_row_answers_as_locating_each_row_alone(data):
    """`RowsView.locate_each` (the pool of a fused recall: rows of several kinds, from several
    lists, some not visible) gives each (kind, position) the label and document `locate` gives it."""
    rows = {}
    for kind in data.draw(st.lists(st.sampled_from(["fact", "episode", "turn"]), unique=True, max_size=3)):
        positions = np.array(sorted(data.draw(st.sets(st.integers(0, 60), max_size=20))), dtype=np.int64)
        labels = np.array(data.draw(st.lists(st.integers(-1, 99), min_size=len(positions), max_size=len(positions))))
        docs = np.array(data.draw(st.lists(st.integers(-1, 99), min_size=len(positions), max_size=len(positions))))
        rows[kind] = (positions, labels.astype(np.int64), docs.astype(np.int64))
    view = RowsView(("fact", "episode", "turn"), rows, (_NONE, _NONE), (_NONE, _NONE))
    placed = []
    for _ in range(data.draw(st.integers(0, 12))):
        kind = data.draw(st.sampled_from(["fact", "episode", "turn", "note"]))
        held = rows[kind][0].tolist() if kind in rows else []
        position = data.draw(st.sampled_from(held) if held and data.draw(st.booleans()) else st.integers(0, 60))
        placed.append(None if data.draw(st.integers(0, 5)) == 0 else (kind, position))
    labels, docs = view.locate_each(placed)
    alone = [None if where is None else view.locate(where[0], np.array([where[1]])) for where in placed]
    assert labels.tolist() == [-1 if found is None else int(found[0][0]) for found in alone]
    assert docs.tolist() == [-1 if found is None else int(found[1][0]) for found in alone]


@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_rows_at_labels_and_documents_are_what_the_reverse_maps_name_one_by_one(data):
    """`RowsView.at_labels` / `at_docs` (a recall's ranked lists, placed at once) give each label or
    document the (kind, position) its reverse map (`by_label`, `by_doc`) holds for it, in the order asked."""
    kinds = ("fact", "episode", "turn")
    size = data.draw(st.integers(1, 40))
    backs = []
    for _ in range(2):
        kind_of = np.array(data.draw(st.lists(st.integers(0, 2), min_size=size, max_size=size)), dtype=np.int16)
        position_of = np.array(data.draw(st.lists(st.integers(0, 10**6), min_size=size, max_size=size)))
        backs.append((kind_of, position_of.astype(np.int64)))
    view = RowsView(kinds, {}, backs[0], backs[1])
    at = np.array(data.draw(st.lists(st.integers(0, size - 1), max_size=12)), dtype=np.int64)
    for got, (kind_of, position_of) in ((view.at_labels(at), backs[0]), (view.at_docs(at), backs[1])):
        assert got == [(kinds[kind_of[i]], int(position_of[i])) for i in at.tolist()]
        assert all(type(position) is int for _, position in got)


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_locating_through_position_hints_answers_as_the_search_whatever_the_hints_hold(data):
    """`RowsView.locate` with `PositionHints` (any entries: right, stale, another org's, out of
    range, an array shorter than the snapshot) gives the labels and documents the binary search
    of the org's positions gives: a hint counts only where the positions hold it."""
    positions = np.array(sorted(data.draw(st.sets(st.integers(0, 80), max_size=30))), dtype=np.int64)
    labels = np.array(data.draw(st.lists(st.integers(-1, 99), min_size=len(positions), max_size=len(positions))))
    docs = np.array(data.draw(st.lists(st.integers(-1, 99), min_size=len(positions), max_size=len(positions))))
    rows = {"fact": (positions, labels.astype(np.int64), docs.astype(np.int64))}
    right = np.full(81, -1, dtype=np.int32)
    right[positions] = np.arange(len(positions))
    noise = data.draw(st.lists(st.integers(-1, 40), max_size=100))
    hints = data.draw(
        st.sampled_from(["right", "noise", "mixed"]).map(
            lambda how: (
                right
                if how == "right"
                else np.array(noise, dtype=np.int32)
                if how == "noise"
                else np.where(np.arange(81) % 3 == 0, right, np.resize(np.array(noise or [-1], dtype=np.int32), 81))
            )
        )
    )
    asked = np.array(data.draw(st.lists(st.integers(0, 80), max_size=40)), dtype=np.int64)
    searched = RowsView(("fact",), rows, (_NONE, _NONE), (_NONE, _NONE)).locate("fact", asked)
    hinted = RowsView(("fact",), rows, (_NONE, _NONE), (_NONE, _NONE), {"fact": hints}).locate("fact", asked)
    assert hinted[0].tolist() == searched[0].tolist()
    assert hinted[1].tolist() == searched[1].tolist()


def test_position_hints_hold_each_noted_rows_index_and_start_afresh_at_a_new_epoch():
    """`PositionHints.note` (what every org's `OrgRows.catch_up` calls with its new rows; that it
    does: tests/test_recall.py) keeps each noted position's index in its org's arrays, beside
    other orgs' entries; a snapshot grown past the array gets a new one, a new epoch an empty
    one, and a map behind the newest epoch notes nothing."""
    hints = PositionHints()
    hints.note("fact", 1, np.array([3, 7, 9]), np.array([0, 1, 2]), 12)
    hints.note("fact", 1, np.array([4, 10]), np.array([0, 1]), 12)  # another org's rows
    array = hints.of("fact")
    assert array is not None and array[[3, 7, 9, 4, 10]].tolist() == [0, 1, 2, 0, 1]
    hints.note("fact", 1, np.array([20]), np.array([3]), 21)  # the snapshot grew past the array
    grown = hints.of("fact")
    assert grown is not None and grown[[3, 20]].tolist() == [0, 3] and grown is not array
    hints.note("fact", 2, np.array([1]), np.array([0]), 5)  # a new epoch: positions moved
    fresh = hints.of("fact")
    assert fresh is not None and fresh[1] == 0 and (fresh[2:] == -1).all()
    hints.note("fact", 1, np.array([2]), np.array([7]), 5)  # a map behind the newest epoch is not noted
    behind = hints.of("fact")
    assert behind is not None and behind[2] == -1
