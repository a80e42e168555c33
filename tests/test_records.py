"""Records read back from a table: `records.record_from_row` builds them without the dataclass
constructor (`records._stored`), and what it builds is what the constructor builds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from _support import ORG, STEWARD, TIER2, day

import memory_lakehouse as ml
from memory_lakehouse.lake import rows_to_pylist
from memory_lakehouse.records import SPECS, _stored, record_columns, record_from_row, stored_fields

NOW = day(10)


def one_of_each_kind() -> list[ml.Envelope]:
    """A record of every kind a store writes itself, optional fields filled in where a kind has them."""
    common: dict[str, Any] = dict(
        source="crm@v3", evidence="ticket 7", confidence=0.8, reason="seen twice", scope=TIER2
    )
    return [
        ml.Fact("user:1", "plan", {"tier": "pro", "seats": [1, 2]}, day(1), valid_to=day(30), **common),
        ml.Preference("user:1", "tone", "terse", day(1), ttl=timedelta(days=9), **common),
        ml.Episode(
            "billing", "prod", "timeouts", "restart", "fixed", day(2), version_from="v1", version_to="v3", **common
        ),
        ml.Reference("https://kb/1", "Refunds", "Refunds take 5 days.", day(3), subject="refunds", **common),
        ml.Policy(
            "p-1",
            "Refund within 30 days.",
            {"region": "eu"},
            day(1),
            effective_to=day(40),
            priority=2,
            approved_by="cfo",
            **common,
        ),
        ml.Note("s-1", "draft", {"step": 2}, valid_from=day(4), **common),
        ml.Turn("s-1", "user", "hello there", day(5), speaker="Ann", position=3, **common),
        ml.Memory("Ann", "Ann moved to Lisbon.", day(5), valid_to=day(50), **common),
    ]


def test_a_record_read_back_is_the_record_its_constructor_builds_from_the_same_values(tmp_path):
    """For every kind: the record `record_from_row` builds without ``__init__`` equals, and
    holds the same attributes as, the one the constructor builds from the row's values
    (`stored_fields`), defaults and all."""
    store = ml.open(tmp_path / "s", clock=lambda: NOW, embedder=ml.HashingEmbedder())
    written = store.write_many(one_of_each_kind(), by=STEWARD)
    turn = next(r.record_id for r in written.results if r.kind == "turn")
    store.write(ml.Summary("s-1", "Ann said hello.", day(6), derived_from=(turn,), source="summariser"), by=STEWARD)
    checked = set()
    for kind in SPECS:
        rows = store.lake.all_rows(kind)
        if not rows.num_rows:
            continue
        for row in rows_to_pylist(rows.select(list(record_columns(kind)))):
            record = record_from_row(kind, row)
            cls = type(record)
            assert cls is SPECS[kind].cls
            built = cls(**stored_fields(kind, row))
            assert record == built
            assert vars(record) == vars(built)
            checked.add(kind)
    assert checked == {r.kind for r in one_of_each_kind()} | {"summary"}
    store.close()


def test_building_a_stored_record_refuses_names_the_class_lacks_and_missing_required_fields():
    fields: dict[str, Any] = {
        "subject": "user:1",
        "attribute": "plan",
        "value": "pro",
        "valid_from": day(1),
        "scope": ORG,
    }
    assert _stored(ml.Fact, fields) == ml.Fact(**fields)
    with pytest.raises(TypeError, match="colour"):
        _stored(ml.Fact, {**fields, "colour": "red"})
    with pytest.raises(TypeError, match="attribute"):
        _stored(ml.Fact, {k: v for k, v in fields.items() if k != "attribute"})
