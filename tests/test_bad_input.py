"""Bad input raises a typed error naming the field, and leaves every file of the store untouched.

Each case snapshots every path under the store root (kind, size, mtime) before the bad
call and compares after it: not one byte, file or directory may change.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from _support import AGENT, BOB, MEMBER, ORG, TIER2, day, episode, fact, snapshot

import memory_lakehouse as ml


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
    "naive valid_from": (
        lambda s: s.write(fact("user:1", "plan", "Pro", NAIVE), by=MEMBER),
        ml.ValidationError,
        "valid_from",
    ),
    "naive valid_to": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), valid_to=NAIVE + timedelta(days=9)), by=MEMBER),
        ml.ValidationError,
        "valid_to",
    ),
    "naive expires_at": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), expires_at=NAIVE), by=MEMBER),
        ml.ValidationError,
        "expires_at",
    ),
    "naive observed_at": (
        lambda s: s.write(episode("checkout", "x", "fixed", NAIVE), by=MEMBER),
        ml.ValidationError,
        "observed_at",
    ),
    "missing source": (
        lambda s: s.write(ml.Fact("user:1", "plan", "Pro", day(1)), by=MEMBER),
        ml.ValidationError,
        "source",
    ),
    "blank source": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), source="  "), by=MEMBER),
        ml.ValidationError,
        "source",
    ),
    "unknown outcome": (
        lambda s: s.write(episode("checkout", "x", "maybe", day(1)), by=MEMBER),
        ml.ValidationError,
        "outcome",
    ),
    "episode without evidence": (
        lambda s: s.write(episode("checkout", "x", "fixed", day(1), evidence=None), by=MEMBER),
        ml.ValidationError,
        "evidence",
    ),
    "write outside the writer's scope": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), scope=BOB), by=MEMBER),
        ml.PermissionDenied,
        None,
    ),
    "write at the team from an actor scope": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1)), by=MEMBER, scope=TIER2),
        ml.PermissionDenied,
        None,
    ),
    "an agent's direct write": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1)), by=AGENT),
        ml.PermissionDenied,
        None,
    ),
    "a non-record object": (
        lambda s: s.write({"subject": "user:1", "value": "Pro"}, by=MEMBER),
        ml.ValidationError,
        "record",
    ),
    "a string instead of a record": (lambda s: s.write("user:1 is on Pro", by=MEMBER), ml.ValidationError, "record"),
    "confidence 1.5": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), confidence=1.5), by=MEMBER),
        ml.ValidationError,
        "confidence",
    ),
    "confidence as text": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), confidence="high"), by=MEMBER),
        ml.ValidationError,
        "confidence",
    ),
    "valid_to before valid_from": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(5), valid_to=day(4)), by=MEMBER),
        ml.ValidationError,
        "valid_to",
    ),
    "valid_to equal to valid_from": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(5), valid_to=day(5)), by=MEMBER),
        ml.ValidationError,
        "valid_to",
    ),
    "by is not a principal": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1)), by="alice"),
        ml.ValidationError,
        "by",
    ),
    "unknown authority": (
        lambda s: s.write(fact("user:1", "plan", "Pro", day(1), authority="rumour"), by=MEMBER),
        ml.ValidationError,
        "authority",
    ),
    "missing value": (lambda s: s.write(fact("user:1", "plan", None, day(1)), by=MEMBER), ml.ValidationError, "value"),
    "50 good records and one bad at the end": (
        lambda s: s.write_many(good_batch() + [fact("user:x", "plan", "Pro", NAIVE)], by=MEMBER),
        ml.ValidationError,
        "valid_from",
    ),
    "50 good records and one bad first": (
        lambda s: s.write_many([episode("checkout", "x", "fixed", day(1), evidence=None)] + good_batch(), by=MEMBER),
        ml.ValidationError,
        "evidence",
    ),
    "50 good records and a non-record in the middle": (
        lambda s: s.write_many(good_batch(25) + [object()] + good_batch(25), by=MEMBER),
        ml.ValidationError,
        "record",
    ),
    "50 good records and one outside the scope": (
        lambda s: s.write_many(good_batch() + [fact("user:x", "plan", "Pro", day(1), scope=ORG)], by=MEMBER),
        ml.PermissionDenied,
        None,
    ),
    "a proposal at a sibling's scope": (
        lambda s: s.propose(fact("user:1", "plan", "Pro", day(1), scope=BOB), by=AGENT),
        ml.PermissionDenied,
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_a_typed_error_naming_the_field_and_writes_nothing(populated, case):
    call, error, field = CASES[case]
    before = snapshot(populated.root)
    with pytest.raises(error) as err:
        call(populated)
    if field is not None:
        assert isinstance(err.value, ml.ValidationError)  # only validation errors name a field
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


# ---------------------------------------------------------------- where in a batch (issue 10, item 6)


def test_a_bad_record_in_a_big_batch_is_named_by_its_index_and_nothing_is_written(populated):
    batch = good_batch(5000)
    batch[2999] = ml.Fact("batch:2999", "plan", "Pro", day(1))  # no source
    before = snapshot(populated.root)
    with pytest.raises(ml.ValidationError) as err:
        populated.write_many(batch, by=MEMBER)
    assert (err.value.index, err.value.field) == (2999, "source")
    assert str(err.value).startswith("records[2999]: source")
    assert snapshot(populated.root) == before


def test_a_single_bad_write_says_what_is_wrong_without_a_batch_index(populated):
    with pytest.raises(ml.ValidationError) as err:
        populated.write(ml.Fact("user:1", "plan", "Pro", day(1)), by=MEMBER)
    assert str(err.value).startswith("source ") and err.value.index == 0


# ---------------------------------------------------------------- text that cannot be stored (items 4 and 5)

P = ml.Principal("lead", ml.Scope("acme"), role="curator")
BIG = "x" * 70_000


def _policy(**kw):
    return ml.Policy(
        kw.pop("policy_id", "returns"),
        kw.pop("text", "30 days"),
        kw.pop("conditions", {"market": "US"}),
        day(1),
        source="handbook",
        **kw,
    )


TOO_BIG = {
    "fact value": (lambda: fact("user:1", "plan", BIG, day(1)), "value"),
    "fact value as JSON": (lambda: fact("user:1", "plan", {"items": ["y" * 100] * 700}, day(1)), "value"),
    "preference value": (lambda: ml.Preference("user:1", "tone", BIG, day(1), source="chat"), "value"),
    "note value": (lambda: ml.Note("sess-1", "draft", BIG, source="chat"), "value"),
    "episode symptom": (lambda: episode("checkout", BIG, "fixed", day(1)), "symptom"),
    "episode action": (lambda: episode("checkout", "timeouts", "fixed", day(1), action=BIG), "action"),
    "reference content": (lambda: ml.Reference("https://docs.example/a", "A", BIG, day(1), source="docs"), "content"),
    "reference title": (lambda: ml.Reference("https://docs.example/a", BIG, "body", day(1), source="docs"), "title"),
    "reference uri": (lambda: ml.Reference("https://docs.example/" + BIG, "A", "b", day(1), source="docs"), "uri"),
    "policy text": (lambda: _policy(text=BIG), "text"),
    "policy conditions": (lambda: _policy(conditions={"market": BIG}), "conditions"),
    "evidence": (lambda: fact("user:1", "plan", "Pro", day(1), evidence=BIG), "evidence"),
    "reason": (lambda: fact("user:1", "plan", "Pro", day(1), reason=BIG), "reason"),
    "source": (lambda: fact("user:1", "plan", "Pro", day(1), source=BIG), "source"),
    "subject": (lambda: fact("user:" + BIG, "plan", "Pro", day(1)), "subject"),
    "multi-byte text under the limit in characters": (lambda: fact("user:1", "plan", "é" * 40_000, day(1)), "value"),
}


@pytest.mark.parametrize("case", list(TOO_BIG))
def test_text_over_the_limit_is_refused_naming_the_field_and_its_size(populated, case):
    make, name = TOO_BIG[case]
    before = snapshot(populated.root)
    with pytest.raises(ml.ValidationError) as err:
        populated.write_many(good_batch(3) + [make()], by=P)
    assert err.value.field == name and err.value.index == 3
    assert re.search(
        rf"^records\[3\]: {name} is [\d,]+ bytes of UTF-8 text, over the limit of 65,536 bytes", str(err.value)
    )
    assert snapshot(populated.root) == before


def test_the_limit_is_set_on_open_and_counts_utf8_bytes(tmp_path, clock):
    store = ml.open(tmp_path / "small", clock=clock, max_text_bytes=100)
    store.write(fact("user:1", "plan", "x" * 100, day(1)), by=MEMBER)
    with pytest.raises(ml.ValidationError, match="value is 102 bytes of UTF-8 text, over the limit of 100 bytes"):
        store.write(fact("user:2", "plan", "é" * 51, day(1)), by=MEMBER)
    with pytest.raises(ml.ValidationError, match="max_text_bytes"):
        ml.open(tmp_path / "other", max_text_bytes=0)
    store.close()


def test_the_default_limit_takes_tens_of_kilobytes(populated):
    populated.write(ml.Reference("https://docs.example/long", "Long", "word " * 12_000, day(1), source="docs"), by=P)


def test_the_commit_reason_is_held_to_the_limit_too(populated):
    before = snapshot(populated.root)
    with pytest.raises(ml.ValidationError) as err:
        populated.write(fact("user:1", "plan", "Pro", day(1)), by=MEMBER, reason=BIG)
    assert err.value.field == "reason"
    assert snapshot(populated.root) == before


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: fact("user:1", "plan", "Pro \udc80", day(1)), "value"),
        (lambda: fact("user:\ud800", "plan", "Pro", day(1)), "subject"),
        (lambda: fact("user:1", "plan", {"note": "\udfff"}, day(1)), "value"),
        (lambda: episode("checkout", "time\udc80outs", "fixed", day(1)), "symptom"),
    ],
)
def test_a_lone_surrogate_is_a_validation_error_not_a_unicode_crash(populated, make, name):
    before = snapshot(populated.root)
    with pytest.raises(ml.ValidationError, match="lone surrogate") as err:
        populated.write(make(), by=MEMBER)
    assert err.value.field == name
    assert snapshot(populated.root) == before


def test_a_preference_ttl_that_is_not_a_duration_is_a_validation_error(populated):
    before = snapshot(populated.root)
    with pytest.raises(ml.ValidationError) as err:
        populated.write(
            ml.Preference("user:1", "tone", "formal", day(1), source="chat", ttl="30d"),  # type: ignore[arg-type]  # the point
            by=MEMBER,
        )
    assert err.value.field == "ttl"
    assert snapshot(populated.root) == before


# ---------------------------------------------------------------- the store's own files (item 5)


def test_a_store_path_that_is_a_file_is_a_store_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    for create in (True, False):
        with pytest.raises(ml.StoreError, match="is a file, not a memory store directory"):
            ml.open(path, create=create)
    assert path.read_text() == "mine"


def test_opening_a_missing_store_to_read_creates_nothing(tmp_path):
    with pytest.raises(ml.StoreError, match="does not exist"):
        ml.open(tmp_path / "nowhere", create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_storage_failure_on_write_is_a_store_error_not_a_delta_error(populated, monkeypatch):
    from deltalake.exceptions import DeltaError

    import memory_lakehouse.lake as lake

    def refuse(*args, **kwargs):
        raise DeltaError(
            "Generic LocalFileSystem error: Unable to open file x.parquet: Permission denied (os error 13)"
        )

    monkeypatch.setattr(lake, "write_deltalake", refuse)
    monkeypatch.setattr(lake.Lake, "direct_appends", False)  # delta-rs's own error, from its writer
    before = snapshot(populated.root)
    with pytest.raises(ml.StoreError, match=r"cannot write to the store at .*: permission denied"):
        populated.write(fact("user:9", "plan", "Pro", day(1)), by=MEMBER)
    assert snapshot(populated.root) == before


def test_an_os_permission_error_on_write_is_a_store_error(populated, monkeypatch):
    import memory_lakehouse.lake as lake

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "x.parquet")

    monkeypatch.setattr(lake, "write_deltalake", refuse)
    monkeypatch.setattr(
        "memory_lakehouse.direct_append.pq.write_table", refuse
    )  # the direct path's (the default) own write
    before = snapshot(populated.root)
    for direct in (True, False):
        monkeypatch.setattr(lake.Lake, "direct_appends", direct)
        with pytest.raises(ml.StoreError, match="permission denied"):
            populated.write(fact("user:9", "plan", "Pro", day(1)), by=MEMBER)
        assert snapshot(populated.root) == before
