"""Bad input raises a typed error naming the field, and leaves every file of the store untouched.

Each case snapshots every path under the store root (kind, size, mtime) before the bad
call and compares after it: not one byte, file or directory may change.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

import memory_lakehouse as ml
from _support import AGENT, BOB, MEMBER, ORG, TIER2, day, episode, fact, snapshot


@pytest.fixture
def populated(store, clock):
    """A store with some history, so 'untouched' covers data files, logs and the ledger."""
    clock.set(day(2))
    store.write(fact("user:42", "plan", "Free Starter", day(1)), by=MEMBER)
    store.write(episode("checkout", "timeouts", "fixed", day(1)), by=MEMBER)
    store.get_fact("user:42", "plan", by=MEMBER)
    return store


def good_batch(n: int = 50) -> list:
    return [fact(f"batch:{i}", "plan", "Pro", day(1)) for i in range(n)]


NAIVE = datetime(2026, 1, 1, 12, 0)

CASES = {
    "naive valid_from": (lambda s: s.write(fact("user:1", "plan", "Pro", NAIVE), by=MEMBER),
                         ml.ValidationError, "valid_from"),
    "naive valid_to": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), valid_to=NAIVE + timedelta(days=9)),
                                         by=MEMBER), ml.ValidationError, "valid_to"),
    "naive expires_at": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), expires_at=NAIVE), by=MEMBER),
                         ml.ValidationError, "expires_at"),
    "naive observed_at": (lambda s: s.write(episode("checkout", "x", "fixed", NAIVE), by=MEMBER),
                          ml.ValidationError, "observed_at"),
    "missing source": (lambda s: s.write(ml.Fact("user:1", "plan", "Pro", day(1)), by=MEMBER),
                       ml.ValidationError, "source"),
    "blank source": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), source="  "), by=MEMBER),
                     ml.ValidationError, "source"),
    "unknown outcome": (lambda s: s.write(episode("checkout", "x", "maybe", day(1)), by=MEMBER),
                        ml.ValidationError, "outcome"),
    "episode without evidence": (lambda s: s.write(episode("checkout", "x", "fixed", day(1), evidence=None),
                                                   by=MEMBER), ml.ValidationError, "evidence"),
    "write outside the writer's scope": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), scope=BOB),
                                                           by=MEMBER), ml.PermissionDenied, None),
    "write at the team from an actor scope": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1)),
                                                                by=MEMBER, scope=TIER2), ml.PermissionDenied, None),
    "an agent's direct write": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1)), by=AGENT),
                                ml.PermissionDenied, None),
    "a non-record object": (lambda s: s.write({"subject": "user:1", "value": "Pro"}, by=MEMBER),
                            ml.ValidationError, "record"),
    "a string instead of a record": (lambda s: s.write("user:1 is on Pro", by=MEMBER), ml.ValidationError, "record"),
    "confidence 1.5": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), confidence=1.5), by=MEMBER),
                       ml.ValidationError, "confidence"),
    "confidence as text": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), confidence="high"), by=MEMBER),
                           ml.ValidationError, "confidence"),
    "valid_to before valid_from": (lambda s: s.write(fact("user:1", "plan", "Pro", day(5), valid_to=day(4)),
                                                     by=MEMBER), ml.ValidationError, "valid_to"),
    "valid_to equal to valid_from": (lambda s: s.write(fact("user:1", "plan", "Pro", day(5), valid_to=day(5)),
                                                       by=MEMBER), ml.ValidationError, "valid_to"),
    "by is not a principal": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1)), by="alice"),
                              ml.ValidationError, "by"),
    "unknown authority": (lambda s: s.write(fact("user:1", "plan", "Pro", day(1), authority="rumour"), by=MEMBER),
                          ml.ValidationError, "authority"),
    "missing value": (lambda s: s.write(fact("user:1", "plan", None, day(1)), by=MEMBER),
                      ml.ValidationError, "value"),
    "50 good records and one bad at the end": (lambda s: s.write_many(
        good_batch() + [fact("user:x", "plan", "Pro", NAIVE)], by=MEMBER), ml.ValidationError, "valid_from"),
    "50 good records and one bad first": (lambda s: s.write_many(
        [episode("checkout", "x", "fixed", day(1), evidence=None)] + good_batch(), by=MEMBER),
        ml.ValidationError, "evidence"),
    "50 good records and a non-record in the middle": (lambda s: s.write_many(
        good_batch(25) + [object()] + good_batch(25), by=MEMBER), ml.ValidationError, "record"),
    "50 good records and one outside the scope": (lambda s: s.write_many(
        good_batch() + [fact("user:x", "plan", "Pro", day(1), scope=ORG)], by=MEMBER), ml.PermissionDenied, None),
    "a proposal at a sibling's scope": (lambda s: s.propose(fact("user:1", "plan", "Pro", day(1), scope=BOB),
                                                            by=AGENT), ml.PermissionDenied, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_a_typed_error_naming_the_field_and_writes_nothing(populated, case):
    call, error, field = CASES[case]
    before = snapshot(populated.root)
    with pytest.raises(error) as err:
        call(populated)
    if field is not None:
        assert err.value.field == field
        assert field in str(err.value)
    assert snapshot(populated.root) == before
    # and the store still works afterwards
    assert populated.get_fact("user:42", "plan", by=MEMBER).value == "Free Starter"


def test_a_rejected_batch_leaves_no_record_of_its_good_part(populated):
    with pytest.raises(ml.ValidationError):
        populated.write_many(good_batch() + [fact("user:x", "plan", "Pro", day(1), confidence=1.5)], by=MEMBER)
    assert all(populated.get_fact(f"batch:{i}", "plan", by=MEMBER) is None for i in range(50))
    assert populated.write_many(good_batch(), by=MEMBER).count("inserted") == 50  # the same batch, fixed


def test_errors_are_also_the_matching_builtins():
    assert issubclass(ml.ValidationError, ValueError) and issubclass(ml.ValidationError, ml.LakehouseError)
    assert issubclass(ml.PermissionDenied, PermissionError) and issubclass(ml.PermissionDenied, ml.LakehouseError)


def test_a_big_batch_leaves_the_garbage_collector_as_it_found_it_even_when_it_fails(store):
    import gc

    from memory_lakehouse.write import GC_PAUSE_BATCH

    good = [fact(f"user:{i}", "plan", "Pro", day(1)) for i in range(GC_PAUSE_BATCH)]
    store.write_many(good, by=MEMBER)
    assert gc.isenabled()
    with pytest.raises(ml.ValidationError):
        store.write_many(good + [fact("user:x", "plan", "Pro", datetime(2026, 1, 1))], by=MEMBER)  # naive
    assert gc.isenabled()
    gc.disable()
    try:
        store.write_many([fact(f"user:{i}", "plan", "Team", day(2)) for i in range(GC_PAUSE_BATCH)], by=MEMBER)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
