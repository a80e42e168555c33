"""Forgetting, the physical half: after `purge` no byte of the subject is left anywhere.

Seed 004's erasure and backup parts: purge rewrites the data files without the
forgotten rows (and what was derived from them), deletes the old files, rebuilds the
index partitions that held them and drops caches, then verifies by scanning bytes. The
checks here scan every file under the store root and the ledger themselves — raw bytes
and decoded parquet values (pages may be compressed) — rather than trusting the report.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from _forgetting import (
    KINDS,
    OTHER,
    SUBJECT,
    canary,
    child_purge,
    files_holding,
    index_holds_vector_of,
    index_ids,
    leaks,
    open_store,
    other_reads,
    write_mixed_world,
)
from _support import (
    AGENT,
    CURATOR,
    MEMBER,
    STEWARD,
    SimClock,
    day,
    episode,
    fact,
    files_under,
    parquet_strings,
    present,
    snapshot,
)
from deltalake import DeltaTable

import memory_lakehouse as ml
from memory_lakehouse.cli import main as memlake
from memory_lakehouse.records import SPECS

TIMES = [day(1, 1), day(2, 1), day(3, 1), day(4, 1)]
#: Instants between the other subject's writes (day 3, every six hours) and after them.
OTHER_TIMES = [day(3, 1), day(3, 7), day(3, 13), day(3, 19), day(4, 12)]


def checkpoint_every_table(root) -> None:
    for kind in KINDS:
        DeltaTable(str(Path(root) / kind)).create_checkpoint()


@pytest.fixture
def world(tmp_path):
    """The subject's memory in every kind, mixed into files shared with another subject,
    an index partition built from it, a checkpoint of every table, and a forget."""
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger")
    can = canary()
    ids = write_mixed_world(store, clock, can)
    checkpoint_every_table(tmp_path / "store")
    return store, clock, can, ids, tmp_path


def erased_texts(store, ids) -> list[str]:
    """The search texts of the subject's records: their vectors must leave the index."""
    wanted = pa.array(sorted(ids.values()))
    texts = []
    for kind in KINDS:
        rows = store.lake.known_rows(kind)
        texts += SPECS[kind].search_text(rows.filter(pc.is_in(rows.column("record_id"), wanted))).to_pylist()
    return texts


def test_purge_leaves_no_byte_of_the_subject_under_the_store_or_in_the_ledger(world):
    store, clock, can, ids, tmp = world
    roots = [tmp / "store", tmp / "ledger"]
    texts = erased_texts(store, ids)
    assert len(texts) == len(ids)
    held = files_holding(roots, [can])[can]
    assert any("_delta_log" not in p for p in held), "the canary must sit in data files before the purge"
    assert set(ids.values()) <= index_ids(tmp / "store") and index_holds_vector_of(tmp / "store", texts)
    assert list((tmp / "store" / "fact" / "_delta_log").glob("*.checkpoint.parquet"))

    report = store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    assert set(ids.values()) <= set(report.record_ids)
    clock.advance(hours=1)
    purged = store.purge(by=STEWARD)

    assert purged.verified is True and purged.leftovers == ()
    assert sum(purged.rows.values()) == len(ids) and purged.rows["fact"] == 5
    assert purged.files_rewritten >= len(ids) and purged.bytes_reclaimed > 0
    assert purged.partitions_rebuilt == ("acme",)
    assert files_holding(roots, [can, SUBJECT]) == {}
    assert not set(ids.values()) & index_ids(tmp / "store")
    assert not index_holds_vector_of(tmp / "store", texts)
    # the store still works, here and in a fresh handle
    assert store.get_fact(OTHER, "region", by=MEMBER).value == "eu-west"
    again = open_store(tmp / "store", clock=clock, ledger=tmp / "ledger")
    assert present(again.get_fact(OTHER, "region", by=MEMBER)).value == "eu-west"
    assert leaks(again, subject=SUBJECT, needles=[can], times=TIMES) == []


def test_a_dry_run_purge_changes_no_file(world):
    store, clock, can, ids, tmp = world
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    before = snapshot(tmp)
    report = store.purge(by=STEWARD, dry_run=True)
    assert report.dry_run and sum(report.rows.values()) == len(ids) and report.verified is None
    assert snapshot(tmp) == before


def test_a_copy_the_purge_cannot_account_for_fails_verification(world):
    store, clock, can, ids, tmp = world
    stray = tmp / "store" / "exports"
    stray.mkdir()
    data_file = next(
        p for p in files_under(tmp / "store" / "fact") if p.suffix == ".parquet" and can in "".join(parquet_strings(p))
    )
    shutil.copy(data_file, stray / "copy.parquet")  # e.g. someone's export left inside the store
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")

    report = store.purge(by=STEWARD)

    assert report.verified is False and report.leftovers == ("exports/copy.parquet",)
    assert "VERIFICATION FAILED" in report.summary()


def test_a_purge_keeps_everyone_elses_as_of_reads_identical(world):
    store, clock, can, ids, tmp = world
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    before = other_reads(store, OTHER_TIMES)
    assert len({str(before[f"plan@{t}"]) for t in OTHER_TIMES}) == 3  # a new plan every 6 hours
    assert before[f"plan@{OTHER_TIMES[0]}"] is not None and before["replay"]

    assert store.purge(by=STEWARD).files_rewritten >= 1

    assert other_reads(store, OTHER_TIMES) == before
    fresh = open_store(tmp / "store", clock=clock, ledger=tmp / "ledger")
    assert other_reads(fresh, OTHER_TIMES) == before


def test_a_restored_backup_serves_nothing_of_the_subject_and_its_next_purge_erases_it(world):
    store, clock, can, ids, tmp = world
    shutil.copytree(tmp / "store", tmp / "backup")  # taken before the forget
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    store.purge(by=STEWARD)
    assert files_holding([tmp / "store"], [can]) == {}
    assert files_holding([tmp / "backup"], [can]), "the backup still holds the bytes"

    restored = ml.open(tmp / "backup", ledger_uri=str(tmp / "ledger"), clock=clock, embedder=ml.HashingEmbedder())

    assert leaks(restored, subject=SUBJECT, needles=[can], times=TIMES) == []
    report = restored.purge(by=STEWARD)
    assert report.verified is True and sum(report.rows.values()) == len(ids)
    assert files_holding([tmp / "backup", tmp / "ledger"], [can, SUBJECT]) == {}
    assert not set(ids.values()) & index_ids(tmp / "backup")


def test_a_backup_opened_with_purge_on_open_is_erased_before_it_serves(world):
    store, clock, can, ids, tmp = world
    shutil.copytree(tmp / "store", tmp / "backup")
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")

    restored = ml.open(
        tmp / "backup",
        ledger_uri=str(tmp / "ledger"),
        clock=clock,
        embedder=ml.HashingEmbedder(),
        purge_on_open=STEWARD,
    )

    assert files_holding([tmp / "backup"], [can]) == {}
    assert not set(ids.values()) & index_ids(tmp / "backup")
    assert present(restored.get_fact(OTHER, "region", by=MEMBER)).value == "eu-west"
    before = snapshot(tmp / "backup")  # nothing left to apply: a second open touches nothing
    ml.open(
        tmp / "backup",
        ledger_uri=str(tmp / "ledger"),
        clock=clock,
        embedder=ml.HashingEmbedder(),
        purge_on_open=STEWARD,
    )
    assert snapshot(tmp / "backup") == before


def test_a_stale_index_in_another_handle_cannot_write_erased_vectors_back(world):
    store, clock, can, ids, tmp = world
    other = open_store(tmp / "store", clock=clock, ledger=tmp / "ledger")  # e.g. an agent's process
    assert other.recall("parcel refund", by=MEMBER, kinds=KINDS)  # holds the partition in memory
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    store.purge(by=STEWARD)

    clock.advance(hours=1)
    other.write_many([fact(f"user:{n}", "note", f"a later note number {n}", day(4)) for n in range(600)], by=CURATOR)
    assert other.recall("later note", by=MEMBER, kinds=KINDS)  # catches up and saves its partition

    assert not set(ids.values()) & index_ids(tmp / "store")


def test_purge_drops_index_partitions_built_by_another_embedding_model(world):
    store, clock, can, ids, tmp = world
    minilm_like = ml.open(
        tmp / "store", ledger_uri=str(tmp / "ledger"), clock=clock, embedder=ml.HashingEmbedder(dim=64)
    )  # another model: another cache key
    assert minilm_like.recall("parcel refund", by=MEMBER, kinds=KINDS)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")

    assert store.purge(by=STEWARD).verified is True

    assert not set(ids.values()) & index_ids(tmp / "store")


def test_memlake_purge_is_a_dry_run_unless_yes(world, capsys):
    store, clock, can, ids, tmp = world
    steward = [
        "--store",
        str(tmp / "store"),
        "--ledger",
        str(tmp / "ledger"),
        "--as",
        "dpo",
        "--scope",
        "acme",
        "--role",
        "steward",
    ]
    assert memlake(["forget", SUBJECT, "--reason", "erasure request", *steward]) == 0
    capsys.readouterr()

    assert memlake(["purge", *steward]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "--yes" in out
    assert files_holding([tmp / "store"], [can])

    assert memlake(["purge", "--yes", "--json", *steward]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is False and report["verified"] is True
    assert files_holding([tmp / "store", tmp / "ledger"], [can]) == {}
    assert not set(ids.values()) & index_ids(tmp / "store")  # the HashingEmbedder partition too

    assert (
        memlake(
            [
                "purge",
                "--as",
                "alice",
                "--scope",
                "acme/support/tier2/alice",
                "--role",
                "member",
                "--store",
                str(tmp / "store"),
                "--ledger",
                str(tmp / "ledger"),
                "--yes",
            ]
        )
        == 2
    )
    assert "PermissionDenied" in capsys.readouterr().err


def test_retention_erases_expired_memory_only_after_ttl_plus_grace(tmp_path):
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock)
    can = {name: canary() for name in ("note", "pref", "failed", "fixed", "fact")}
    store.write(ml.Note("sess-1", "scratch", f"{can['note']} draft"), by=MEMBER)  # 4 hours of TTL
    store.write(
        ml.Preference(
            "user:42", "channel", f"{can['pref']} email", day(1), ttl=timedelta(days=10), source="user_explicit"
        ),
        by=CURATOR,
    )
    store.write(episode("checkout", f"{can['failed']} restart did not help", "failed", day(1)), by=CURATOR)
    store.write(episode("checkout", f"{can['fixed']} cache flush fixed it", "fixed", day(1)), by=CURATOR)
    store.write(fact("user:42", "plan", f"{can['fact']} starter", day(1)), by=CURATOR)
    assert store.recall("draft email restart flush starter", by=MEMBER, kinds=KINDS)  # index the rows
    grace = timedelta(days=7)

    def held() -> set[str]:
        return set(files_holding([tmp_path / "store"], can.values()))

    def purge_at(when):
        clock.set(when)
        return store.purge(by=STEWARD, grace=grace)

    assert held() == set(can.values())
    report = purge_at(day(1, 5))  # the note expired an hour ago: past its TTL, inside the grace
    assert report.expired_rows == 0 and held() == set(can.values())
    assert store.recall("draft", by=MEMBER, kinds=["note"]) == []  # expired is never served, even unerased

    assert purge_at(day(8, 3)).expired_rows == 0  # one hour short of TTL + grace
    assert purge_at(day(8, 5)).expired_rows == 1
    assert held() == set(can.values()) - {can["note"]}
    assert purge_at(day(17, 23)).expired_rows == 0  # the preference expires on day 11, + 7 days
    assert purge_at(day(18, 1)).expired_rows == 1
    assert held() == {can["failed"], can["fixed"], can["fact"]}
    assert purge_at(day(97, 23)).expired_rows == 0  # failed episodes expire after 90 days, + 7
    report = purge_at(day(98, 1))
    assert report.expired_rows == 1 and report.verified is True
    assert held() == {can["fixed"], can["fact"]}  # fixed episodes and facts do not expire
    live = {h.record_id for h in store.recall("x", by=MEMBER, kinds=KINDS, k=50)}
    assert index_ids(tmp_path / "store") == live


def test_forget_and_purge_are_recorded_by_whom_why_and_when_without_content(world):
    store, clock, can, ids, tmp = world
    clock.advance(hours=2)
    forgotten = store.forget(SUBJECT, by=STEWARD, reason="erasure request, ticket 5521")
    clock.advance(hours=3)
    purge_at = clock.now
    store.purge(by=STEWARD)

    events = store.audit(subject=SUBJECT, by=STEWARD)
    ops = [e.operation for e in events]
    assert "forget" in ops and "purge" in ops and ops.index("forget") < ops.index("purge")
    forget_event = next(e for e in events if e.operation == "forget")
    purge_event = next(e for e in events if e.operation == "purge")
    assert (forget_event.actor, forget_event.committed_at) == ("dpo", forgotten.at)
    assert forget_event.reason == "erasure request, ticket 5521"
    assert (purge_event.actor, purge_event.committed_at) == ("dpo", purge_at) and purge_event.reason
    assert set(ids.values()) <= {r for e in events for r in e.record_ids}
    assert can not in repr(events) and SUBJECT not in repr(events)

    # the Delta commits that rewrote the tables say so too, with no content
    infos = [
        json.loads(line)["commitInfo"]
        for kind in KINDS
        for log in sorted((tmp / "store" / kind / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if '"commitInfo"' in line
    ]
    purges = [i for i in infos if i.get("memlake.op") == "purge"]
    assert {i["memlake.actor"] for i in purges} == {"dpo"}
    assert {i["memlake.committed_at"] for i in purges} == {purge_at.isoformat()}
    assert all(i["memlake.reason"] for i in purges)
    ledger_infos = [
        json.loads(line)["commitInfo"]
        for log in sorted((tmp / "ledger" / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if '"commitInfo"' in line
    ]
    assert [i.get("memlake.op") for i in ledger_infos if i.get("memlake.op")][:2] == ["forget", "purge"]
    assert files_holding([tmp / "store", tmp / "ledger"], [can, SUBJECT]) == {}


# ---------------------------------------------------------------- what verification counts as a leak
#
# The commit log outlives every purge, so it must hold nothing a purge erases: a commit's
# reason belongs to the commit (audit reads it there), not to the rows it writes, and the
# write path takes the batch's subject names out of it. Text that a surviving record also
# holds is that record's, not evidence of a leak in the data files; the log, the index and
# the ledger hold no content at all, so their scan counts every erased value.

SHARED = "Enterprise Pro"  # a plan name: the forgotten subject's value, and words of a kept article
ARTICLE = f"{SHARED} plans include 50 seats and priority support"


@pytest.fixture
def fresh(tmp_path):
    clock = SimClock(day(1))
    return open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger"), clock, canary(), tmp_path


def _forget_and_purge(store, clock):
    clock.advance(hours=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    return store.purge(by=STEWARD)


def test_propose_approve_forget_purge_verifies_and_the_audit_still_says_why(fresh):
    store, clock, can, tmp = fresh
    store.write(fact(SUBJECT, "plan", f"{can} starter", day(0)), by=CURATOR)
    clock.advance(days=1)
    store.write(fact(SUBJECT, "plan", f"{can} business", day(1)), by=CURATOR, reason="upgrade after invoice 2231")
    prop = store.propose(fact(SUBJECT, "region", f"{can} north-east", day(1)), by=AGENT)  # no reason of its own
    clock.advance(hours=1)
    store.approve(prop.record_id, by=CURATOR)  # the default reason: "approved proposal <id>"
    wrong = store.write(fact(SUBJECT, "seats", f"{can} fifty", day(1)), by=CURATOR)
    store.retract(wrong.record_id, by=CURATOR, reason="typo in the CRM import")

    report = _forget_and_purge(store, clock)

    assert report.verified is True and report.leftovers == (), report.leftovers
    assert files_holding([tmp / "store", tmp / "ledger"], [can, SUBJECT]) == {}
    why = {(e.operation, e.actor, e.reason) for e in store.audit(subject=SUBJECT, by=STEWARD)}
    assert {
        ("write", "lead", "upgrade after invoice 2231"),
        ("propose", "triage-bot", None),
        ("approve", "lead", f"approved proposal {prop.record_id}"),
        ("retract", "lead", "typo in the CRM import"),
    } <= why


def test_a_row_keeps_its_own_reason_and_the_commit_reason_stays_in_the_commit(store, clock):
    store.write(fact("user:42", "plan", "Starter", day(0)), by=MEMBER)
    clock.advance(days=1)
    store.write(fact("user:42", "plan", "Pro", day(1)), by=MEMBER, reason="upgrade invoice 2231")
    assert store.get_fact("user:42", "plan", by=MEMBER).reason is None
    clock.advance(days=1)
    store.write(
        fact("user:42", "plan", "Team", day(2), reason="the customer asked in chat"),
        by=MEMBER,
        reason="nightly CRM sync",
    )
    current = store.get_fact("user:42", "plan", by=MEMBER)
    assert (current.value, current.reason) == ("Team", "the customer asked in chat")
    assert [e.reason for e in store.audit(subject="user:42", by=STEWARD)] == [
        None,
        "upgrade invoice 2231",
        "nightly CRM sync",
    ]


def test_the_write_path_takes_the_batchs_subject_names_out_of_the_commit_reason(fresh):
    store, clock, can, tmp = fresh
    store.write(fact(SUBJECT, "plan", f"{can} starter", day(0)), by=CURATOR)
    clock.advance(days=1)
    store.write_many(
        [fact(SUBJECT, "plan", f"{can} business", day(1)), fact(OTHER, "plan", "basic plan", day(1))],
        by=CURATOR,
        reason=f"{SUBJECT.upper()} and {OTHER} moved after invoice 2231",
    )
    prop = store.propose(
        fact(SUBJECT, "region", f"{can} north-east", day(1)), by=AGENT, reason=f"{SUBJECT} said so in chat"
    )
    store.approve(prop.record_id, by=CURATOR, reason=f"confirmed with {SUBJECT}'s account manager")
    logs = [p for kind in KINDS for p in (tmp / "store" / kind / "_delta_log").glob("*.json")]
    assert not [p for p in logs if SUBJECT.encode() in p.read_bytes().lower() or OTHER.encode() in p.read_bytes()]
    reasons = [e.reason for e in store.audit(subject=SUBJECT, by=STEWARD)]
    assert reasons == [
        None,
        "<subject> and <subject> moved after invoice 2231",
        "<subject> said so in chat",
        "confirmed with <subject>'s account manager",
    ]

    report = _forget_and_purge(store, clock)

    assert report.verified is True, report.leftovers
    assert files_holding([tmp / "store", tmp / "ledger"], [can, SUBJECT]) == {}


def test_the_subjects_value_in_a_commit_reason_is_a_leak_the_purge_reports(fresh):
    store, clock, can, tmp = fresh
    store.write(fact(SUBJECT, "plan", f"{can} starter", day(0)), by=CURATOR, reason=f"set to {can} starter")

    report = _forget_and_purge(store, clock)

    assert report.verified is False
    assert report.leftovers and all(p.startswith("fact/_delta_log/") for p in report.leftovers), report.leftovers
    assert "VERIFICATION FAILED" in report.summary()


def test_the_subjects_name_in_another_writes_reason_is_a_leak_the_purge_reports(fresh):
    store, clock, can, tmp = fresh
    store.write(fact(SUBJECT, "plan", f"{can} starter", day(0)), by=CURATOR)
    store.write(fact(OTHER, "plan", "basic plan", day(0)), by=CURATOR, reason=f"split from {SUBJECT}'s account")

    report = _forget_and_purge(store, clock)

    assert report.verified is False
    assert report.leftovers and all(p.startswith("fact/_delta_log/") for p in report.leftovers), report.leftovers


def test_a_value_a_surviving_record_also_holds_is_not_a_leak(fresh):
    store, clock, can, tmp = fresh
    store.write(ml.Reference("kb://plans/seats", "Plans and seats", ARTICLE, day(0), source="kb@v1"), by=CURATOR)
    store.write_many(
        [
            fact(SUBJECT, "plan", SHARED, day(0), evidence="billing:inv-2231"),
            fact(SUBJECT, "billing_contact", f"{can} finance desk", day(0)),
            fact(OTHER, "billing_contact", "front desk", day(0)),
        ],
        by=CURATOR,
    )

    report = _forget_and_purge(store, clock)

    assert report.verified is True and report.leftovers == (), report.leftovers
    assert files_holding([tmp / "store", tmp / "ledger"], [can, SUBJECT, "billing:inv-2231"]) == {}
    assert files_holding([tmp / "store"], [ARTICLE])  # the article stays, as it should
    assert [h.record.content for h in store.recall("enterprise plans seats", by=MEMBER, kinds=["reference"])] == [
        ARTICLE
    ]


def _data_file(tmp, kind: str, can: str) -> Path:
    return next(
        p
        for p in files_under(tmp / "store" / kind)
        if p.suffix == ".parquet" and "_delta_log" not in p.parts and can in "".join(parquet_strings(p))
    )


@pytest.mark.parametrize("left", ["old file", "record id", "own value", "subject"])
def test_the_subjects_data_left_in_a_data_file_fails_verification_even_beside_shared_text(fresh, left):
    store, clock, can, tmp = fresh
    store.write(ml.Reference("kb://plans/seats", "Plans and seats", ARTICLE, day(0), source="kb@v1"), by=CURATOR)
    res = store.write_many(
        [
            fact(SUBJECT, "plan", SHARED, day(0)),
            fact(SUBJECT, "note", f"{can} finance desk", day(0)),
            fact(OTHER, "plan", "basic plan", day(0)),
        ],
        by=CURATOR,
    )
    stale = tmp / "store" / "fact" / "org=acme" / "part-00000-stale.parquet"  # a file the table no longer lists
    if left == "old file":
        shutil.copy(_data_file(tmp, "fact", can), stale)
    else:
        value = {"record id": res[0].record_id, "own value": f'"{can} finance desk"', "subject": SUBJECT}[left]
        pa.parquet.write_table(pa.table({"text": [value, f'"{SHARED}"', ARTICLE]}), stale)

    report = _forget_and_purge(store, clock)

    assert report.verified is False and report.leftovers == ("fact/org=acme/part-00000-stale.parquet",)


def test_a_value_a_surviving_record_holds_is_still_a_leak_in_the_log(fresh):
    store, clock, can, tmp = fresh
    store.write(ml.Reference("kb://plans/seats", "Plans and seats", ARTICLE, day(0), source="kb@v1"), by=CURATOR)
    store.write(fact(SUBJECT, "plan", SHARED, day(0)), by=CURATOR, reason=f"moved to {SHARED}")

    report = _forget_and_purge(store, clock)

    assert report.verified is False
    assert report.leftovers and all(p.startswith("fact/_delta_log/") for p in report.leftovers), report.leftovers


# ---------------------------------------------------------------- crash


def _sizable_store(root: Path, ledger: Path, clock: SimClock, can: str) -> None:
    """5,000 rows in ten commits, the subject's rows (every kind) in each file; indexed,
    checkpointed, and the subject forgotten."""
    store = open_store(root, clock=clock, ledger=ledger)
    for b in range(10):
        rows: list[ml.Envelope] = [
            fact(f"user:{b}-{i}", "note", f"filler {b} {i} alpha bravo", day(0)) for i in range(495)
        ]
        rows += [
            fact(SUBJECT, f"note{b}", f"{can} fact {b}", day(0)),
            ml.Preference(SUBJECT, f"pref{b}", f"{can} preference {b}", day(0), source="test@v1"),
            episode("checkout", f"{can} episode {b}", "fixed", day(0), subject=SUBJECT),
            ml.Note(f"s{b}", "k", f"{can} note {b}", subject=SUBJECT, ttl=timedelta(days=300)),
            ml.Reference(
                f"https://crm.example/{b}", "t", f"{can} reference {b}", day(0), source="crm@v2", subject=SUBJECT
            ),
        ]
        store.write_many(rows, by=CURATOR)
        clock.advance(hours=1)
    store.rebuild_index()
    checkpoint_every_table(root)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")


@pytest.mark.slow
@pytest.mark.integration
def test_a_purge_killed_at_any_point_is_finished_by_the_next_purge(tmp_path):
    clock = SimClock(day(1))
    can = canary()
    _sizable_store(tmp_path / "template" / "store", tmp_path / "template" / "ledger", clock, can)
    ctx = multiprocessing.get_context("spawn")
    outcomes = []
    for n, delay in enumerate([0.0, 0.3, 0.5, 0.8, 1.4]):  # before, amid the rewrites, the deletes, the index
        work = tmp_path / f"run{n}"
        shutil.copytree(tmp_path / "template", work)
        ready = ctx.Event()
        child = ctx.Process(target=child_purge, args=(str(work / "store"), str(work / "ledger"), clock.now, ready))
        child.start()
        assert ready.wait(120)
        time.sleep(delay)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        outcomes.append((delay, child.exitcode))

        store = open_store(work / "store", clock=clock, ledger=work / "ledger")  # it opens
        assert store.get_fact(SUBJECT, "note3", by=MEMBER) is None  # and still hides the subject
        assert not [
            h
            for h in store.recall("fact preference episode note reference", by=MEMBER, kinds=KINDS, k=50)
            if can in h.text
        ]
        report = store.purge(by=STEWARD)
        assert report.verified is True, (delay, report.leftovers)
        assert files_holding([work / "store", work / "ledger"], [can]) == {}, delay
        assert not set(store.ledger.forgotten().record_ids) & index_ids(work / "store"), delay
        assert "purge" in [e.operation for e in store.audit(subject=SUBJECT, by=STEWARD)], delay
        assert present(store.get_fact("user:3-7", "note", by=MEMBER)).value == "filler 3 7 alpha bravo"
    assert any(code == -signal.SIGKILL for _, code in outcomes), outcomes


def test_the_verification_scan_finds_a_value_in_compressed_and_nested_parquet(tmp_path):
    from memory_lakehouse.forget import scan_for

    can = canary()
    nested = pa.table(
        {"add": pa.array([{"path": "x", "stats": {"min": f'"{can}"'}}]), "tags": pa.array([["tag", can]])}
    )
    pq.write_table(
        nested, tmp_path / "00000000000000000003.checkpoint.parquet", compression="gzip", write_statistics=False
    )
    pq.write_table(
        pa.table({"value": [f'"{can}"']}), tmp_path / "part-0.parquet", compression="gzip", write_statistics=False
    )
    (tmp_path / "clean.json").write_text('{"a": 1}')
    for name in ("part-0.parquet", "00000000000000000003.checkpoint.parquet"):  # compressed: raw bytes miss it
        assert can.encode() not in (tmp_path / name).read_bytes()
    assert scan_for(tmp_path, {can}) == ["00000000000000000003.checkpoint.parquet", "part-0.parquet"]


def test_a_source_naming_the_subject_reaches_the_log_without_it(fresh):
    """Writers go to the commit log too: a source that names the subject is scrubbed there."""
    store, clock, can, tmp = fresh
    store.write(fact(SUBJECT, "plan", f"{can} starter", day(0), source=f"crm-export:{SUBJECT}"), by=CURATOR)
    logs = [p for kind in KINDS for p in (tmp / "store" / kind / "_delta_log").glob("*.json")]
    assert not [p for p in logs if SUBJECT.encode() in p.read_bytes()]
    assert store.get_fact(SUBJECT, "plan", by=CURATOR).source == f"crm-export:{SUBJECT}"  # the row keeps it

    report = _forget_and_purge(store, clock)

    assert report.verified is True, report.leftovers
    assert files_holding([tmp / "store", tmp / "ledger"], [can, SUBJECT]) == {}


def test_an_expired_note_with_a_short_session_id_is_purged_and_verified(tmp_path):
    """A note's default subject names its session, and its default source must not: the log keeps sources."""
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger")
    store.write(ml.Note("s-1", "draft", "offer the launch discount again"), by=MEMBER)
    clock.advance(days=1)
    report = store.purge(by=STEWARD)
    assert report.rows["note"] == 1
    assert report.verified is True and report.leftovers == (), report.leftovers


def test_an_expired_note_about_a_customer_leaves_no_session_id_in_the_log(tmp_path):
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger")
    store.write(
        ml.Note("call-0302", "draft", "offer the launch discount again", subject="customer:halvorsen"), by=MEMBER
    )
    clock.advance(days=1)
    report = store.purge(by=STEWARD)
    assert report.verified is True and report.leftovers == (), report.leftovers
    assert files_holding([tmp_path / "store"], ["call-0302"]) == {}
