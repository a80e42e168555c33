"""Which records share a slot: the write path supersedes within one, and reads pick one head per slot.

A slot's lineage id hashes its parts, stripped and case-folded (`records._slot`). Stored
rows carry it, so an id must stay what it was for the same parts, and two different
parts must never make one id: a write about one subject would supersede another's.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from _support import present

import memory_lakehouse as ml
from memory_lakehouse.records import SLOT_SEPARATOR, fact_slot

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_slots_lineage_id_is_what_stored_rows_carry_for_the_same_parts():
    joined = SLOT_SEPARATOR.join(["fact", "user:1", "plan"])
    assert fact_slot("fact", "user:1", "plan") == hashlib.sha256(joined.encode()).hexdigest()[:32]
    assert fact_slot("fact", " User:1 ", "PLAN") == fact_slot("fact", "user:1", "plan")
    assert fact_slot("preference", "user:1", "plan") != fact_slot("fact", "user:1", "plan")


def test_parts_that_would_join_alike_are_slots_of_their_own(tmp_path):
    store = ml.open(tmp_path / "s", clock=lambda: T0 + timedelta(days=1), embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    one = store.write(ml.Fact(f"a{SLOT_SEPARATOR}b", "c", "one", T0, source="crm"), by=lead)
    two = store.write(ml.Fact("a", f"b{SLOT_SEPARATOR}c", "two", T0 + timedelta(hours=1), source="crm"), by=lead)
    assert (one.action, two.action) == ("inserted", "inserted")
    assert one.lineage_id != two.lineage_id
    assert present(store.get_fact(f"a{SLOT_SEPARATOR}b", "c", by=lead)).value == "one"
    assert present(store.get_fact("a", f"b{SLOT_SEPARATOR}c", by=lead)).value == "two"
