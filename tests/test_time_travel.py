"""System time is the Delta log: as-of reads agree with Delta time travel, and survive maintenance.

For every memory commit of every table, the rows Delta time travel gives at that
version are exactly the rows the store says it knew at that commit's clock reading,
and the store's as-of answer equals the answer of the same visibility query run over
a store cut back to that version. Log cleanup, checkpoints, compaction and vacuum
change none of it.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow.compute as pc
import pytest
from _support import AGENT, CURATOR, MEMBER, SIBLING, TIER2, SimClock, age_files, day, episode, fact, present
from deltalake import DeltaTable

import memory_lakehouse as ml
from memory_lakehouse.lake import MEMORY_OPS, Commit
from memory_lakehouse.records import SPECS
from memory_lakehouse.time import Basis

TABLES = tuple(SPECS)
READERS = (MEMBER, CURATOR, AGENT, SIBLING)


def tell_story(store: ml.MemoryStore, clock: SimClock) -> dict[str, str]:
    """A dozen writes over several kinds: duplicates, supersessions, a retraction, a proposal."""
    ids: dict[str, str] = {}
    clock.set(day(1))
    ids["free"] = store.write(fact("user:42", "plan", "Free Starter", day(1)), by=MEMBER).record_id
    store.write(ml.Preference("user:42", "tone", "brief", day(1), source="chat"), by=MEMBER)  # same reading
    clock.set(day(2))
    ids["ep1"] = store.write(episode("checkout", "timeouts", "failed", day(2)), by=MEMBER).record_id
    store.write(fact("user:7", "plan", "Basic", day(2)), by=MEMBER)
    clock.set(day(3))
    assert store.write(fact("user:42", "plan", "Free Starter", day(3)), by=MEMBER).action == "duplicate"
    clock.set(day(4))
    ids["pro"] = store.write(fact("user:42", "plan", "Enterprise Pro", day(4)), by=MEMBER).record_id
    batch = store.write_many(
        [  # one transaction over three tables, at the same reading as the write above
            fact("user:9", "region", "EU", day(4), scope=TIER2),
            episode("search", "slow queries", "fixed", day(4), scope=TIER2, evidence="https://tracker.example/PR-9"),
            ml.Reference(
                "https://wiki.example/runbook", "Runbook", "restart the pool", day(4), source="wiki", scope=TIER2
            ),
        ],
        by=CURATOR,
    )
    assert len(batch.versions) == 3
    clock.set(day(5))
    store.retract(ids["pro"], by=MEMBER, reason="wrong account")
    clock.set(day(6))
    store.write(
        ml.Reference(
            "https://wiki.example/runbook", "Runbook", "restart the pool, then page", day(6), source="wiki", scope=TIER2
        ),
        by=CURATOR,
    )
    clock.set(day(7))
    ids["prop"] = store.propose(fact("user:42", "seats", 50, day(7)), by=AGENT, scope=TIER2).record_id
    clock.set(day(8))
    store.approve(ids["prop"], by=CURATOR)
    store.write(ml.Note("sess-1", "draft", "offer the upgrade"), by=MEMBER)
    clock.set(day(9))
    store.write(ml.Preference("user:42", "tone", "detailed", day(9), source="chat"), by=MEMBER)
    store.write(fact("user:42", "plan", "Enterprise Max", day(12)), by=MEMBER)  # valid in the future
    clock.set(day(10))
    assert store.write(episode("checkout", "timeouts", "failed", day(2)), by=MEMBER).action == "duplicate"
    clock.set(day(11))
    return ids


def memory_versions(store: ml.MemoryStore, table: str) -> dict[int, Commit]:
    return {v: c for v, c in store.lake.views[table].commits.items() if c.operation in MEMORY_OPS}


def last_version_at(store: ml.MemoryStore, table: str, t) -> int:
    """The last memory commit of *table* with a clock reading at or before *t* (0: the empty table)."""
    return max((v for v, c in memory_versions(store, table).items() if c.committed_at <= t), default=0)


def ids_of(table) -> set[str]:
    return set(table.column("record_id").to_pylist())


def visible_ids(store: ml.MemoryStore, kind: str, who: ml.Principal, t) -> set[str]:
    return ids_of(store.vis.rows(kind, who, Basis(known_at=t, valid_at=t)))


def cut_back(root: str, dest: Path, versions: dict[str, int], t) -> ml.MemoryStore:
    """A copy of the store whose tables end at *versions*: what Delta time travel reads."""
    shutil.copytree(root, dest)
    for table, keep in versions.items():
        log = dest / table / "_delta_log"
        for f in log.iterdir():
            if f.name == "_last_checkpoint" or int(f.name.split(".")[0]) > keep:
                f.unlink()
    return ml.open(dest, clock=SimClock(t), create=False)


@pytest.fixture
def story(store, clock):
    return store, tell_story(store, clock)


def test_time_travel_to_each_memory_commit_gives_exactly_the_rows_known_at_its_clock_reading(story):
    store, _ = story
    checked = 0
    for table in TABLES:
        known = store.lake.known_rows(table)
        versions = memory_versions(store, table)
        for v, commit in versions.items():
            t = commit.committed_at
            last = max(w for w, c in versions.items() if c.committed_at == t)
            known_then = ids_of(known.filter(pc.less_equal(known.column("known_since"), t)))
            assert ids_of(store.lake.load_as_version(table, last)) == known_then, (table, v)
            assert ids_of(store.lake.load_as_version(table, v)) <= known_then
            assert store.lake.memory_commit_at(table, t).version == last
            checked += 1
    assert checked >= 12


def test_an_as_of_read_equals_the_same_query_over_the_time_travelled_tables(story, tmp_path):
    store, _ = story
    readings = sorted({c.committed_at for t in TABLES for c in memory_versions(store, t).values()})
    assert len(readings) >= 8
    for n, t in enumerate(readings):
        versions = {table: last_version_at(store, table, t) for table in TABLES}
        then = cut_back(store.root, tmp_path / f"at-{n}", versions, t)
        for table, v in versions.items():
            raw = DeltaTable(str(tmp_path / f"at-{n}" / table)).to_pyarrow_dataset().to_table()
            assert ids_of(raw) == ids_of(store.lake.load_as_version(table, v))
        for kind in TABLES:
            for who in READERS:
                assert visible_ids(store, kind, who, t) == visible_ids(then, kind, who, t), (t, kind, who.id)
        now = store.get_fact("user:42", "plan", by=MEMBER, as_of=t)
        then_fact = then.get_fact("user:42", "plan", by=MEMBER)  # the cut-back store's clock reads t
        assert (now and now.record_id) == (then_fact and then_fact.record_id)


def test_the_story_reads_as_told(story):
    store, ids = story

    def plan(t: datetime) -> ml.Fact | ml.Preference:
        return present(store.get_fact("user:42", "plan", by=MEMBER, as_of=t))

    assert plan(day(1)).value == "Free Starter"
    assert plan(day(4)).record_id == ids["pro"]
    assert plan(day(5)).record_id == ids["free"]  # the retraction is known from day 5
    assert plan(day(11)).record_id == ids["free"]  # Enterprise Max is valid from day 12
    assert plan(day(12)).value == "Enterprise Max"
    assert store.get_fact("user:42", "seats", by=MEMBER, as_of=day(7)) is None
    assert store.get_fact("user:42", "seats", by=MEMBER, as_of=day(8)).value == 50


# --------------------------------------------------------------------------- the log outlives cleanup


def answers(store: ml.MemoryStore) -> dict:
    readings = sorted({c.committed_at for t in TABLES for c in memory_versions(store, t).values()})
    out = {}
    for t in readings:
        for kind in TABLES:
            for who in (MEMBER, CURATOR):
                out[(t, kind, who.id)] = visible_ids(store, kind, who, t)
    return out


def commit_log(store: ml.MemoryStore) -> list[tuple]:
    return [(c.table, c.version, c.committed_at, c.operation, c.txn_id) for c in store.lake.commits()]


def test_system_time_survives_checkpoints_and_log_cleanup_of_old_commit_files(story, clock):
    store, _ = story
    before, log_before = answers(store), commit_log(store)
    jsons = {table: sorted((Path(store.root) / table / "_delta_log").glob("*.json")) for table in TABLES}
    for table in TABLES:
        age_files(jsons[table], days=60)
        dt = DeltaTable(f"{store.root}/{table}")
        dt.create_checkpoint()
        dt.cleanup_metadata()
    for table in TABLES:
        assert sorted((Path(store.root) / table / "_delta_log").glob("*.json")) == jsons[table]
        assert list((Path(store.root) / table / "_delta_log").glob("*.checkpoint.parquet"))
    config = DeltaTable(f"{store.root}/fact").metadata().configuration
    assert config["delta.enableExpiredLogCleanup"] == "false"
    assert config["delta.logRetentionDuration"] == "interval 36500 days"

    reopened = ml.open(store.root, clock=clock)
    assert commit_log(reopened) == log_before
    assert answers(reopened) == before
    clock.advance(days=1)
    assert reopened.write(fact("user:42", "plan", "Platinum", clock.now), by=MEMBER).action == "superseded"
    after = answers(reopened)
    assert {k: after[k] for k in before} == before  # the new commit changed no past answer
    assert answers(ml.open(store.root, clock=clock)) == after


def test_a_table_with_default_log_settings_would_lose_its_old_commits(tmp_path):
    """The control for the test above: Delta's own defaults delete the commit files we rely on."""
    import pyarrow as pa
    from deltalake import write_deltalake

    uri = str(tmp_path / "plain")
    DeltaTable.create(uri, schema=pa.schema([("a", pa.int64())]))
    for i in range(3):
        write_deltalake(uri, pa.table({"a": [i]}), mode="append")
    age_files((tmp_path / "plain" / "_delta_log").glob("*.json"), days=60)
    dt = DeltaTable(uri)
    dt.create_checkpoint()
    dt.cleanup_metadata()
    assert not (tmp_path / "plain" / "_delta_log" / f"{0:020d}.json").exists()


# --------------------------------------------------------------------------- maintenance is not learning


@pytest.mark.parametrize("start", [day(0), day(1500)], ids=["story-before-the-wall-clock", "story-after-it"])
def test_compaction_changes_no_as_of_answer_and_is_not_a_memory_commit(tmp_path, start):
    clock = SimClock(start)
    store = ml.open(tmp_path / "store", clock=clock)
    for i in range(6):
        clock.advance(days=1)
        store.write(fact("user:42", "plan", f"plan-{i % 4}", clock.now), by=MEMBER)
        store.write(fact(f"user:{i}", "region", "EU", clock.now - timedelta(days=3)), by=MEMBER)
    readings = sorted(c.committed_at for c in memory_versions(store, "fact").values())
    probe = readings + [r + timedelta(hours=6) for r in readings] + [start, start + timedelta(days=5000)]
    before = {t: visible_ids(store, "fact", MEMBER, t) for t in probe}
    known_before = store.lake.known_rows("fact").select(["record_id", "known_since"]).sort_by("record_id")
    last_write = present(store.lake.memory_commit_at("fact", start + timedelta(days=5000)))

    metrics = DeltaTable(f"{store.root}/fact").optimize.compact()
    assert metrics["numFilesRemoved"] > 1  # the compaction really rewrote files

    for s in (store, ml.open(tmp_path / "store", clock=clock)):
        s.lake.refresh()
        newest = max(s.lake.views["fact"].commits.values(), key=lambda c: c.version)
        assert newest.operation == "optimize" and not newest.is_memory
        assert present(s.lake.memory_commit_at("fact", start + timedelta(days=5000))).version == last_write.version
        at_compaction = s.lake.memory_commit_at("fact", newest.committed_at)
        assert at_compaction is None or at_compaction.operation in MEMORY_OPS
        assert s.clock.peek() == clock.now  # the wall-clock timestamp of the compaction moved nothing
        assert {t: visible_ids(s, "fact", MEMBER, t) for t in probe} == before
        known = s.lake.known_rows("fact").select(["record_id", "known_since"]).sort_by("record_id")
        assert known.equals(known_before)


def test_as_of_reads_survive_vacuum_of_the_files_old_versions_need(tmp_path):
    clock = SimClock(day(0))
    store = ml.open(tmp_path / "store", clock=clock)
    for i in range(4):
        clock.advance(days=1)
        store.write(fact("user:42", "plan", f"plan-{i}", clock.now), by=MEMBER)
    readings = sorted(c.committed_at for c in memory_versions(store, "fact").values())
    before = {t: present(store.get_fact("user:42", "plan", by=MEMBER, as_of=t)).value for t in readings}
    dt = DeltaTable(f"{store.root}/fact")
    dt.optimize.compact()
    removed = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert removed

    with pytest.raises(FileNotFoundError):  # Delta time travel to a vacuumed version has nothing to read
        store.lake.load_as_version("fact", 1)
    for s in (store, ml.open(tmp_path / "store", clock=clock)):
        assert {t: present(s.get_fact("user:42", "plan", by=MEMBER, as_of=t)).value for t in readings} == before


# --------------------------------------------------------------------------- many writers, many clocks


def test_a_commit_stamped_by_a_lagging_clock_is_known_no_earlier_than_the_commits_before_it(tmp_path):
    """Two handles on one store, the second's clock behind: system time still only moves forward."""
    fast, slow = SimClock(day(0)), SimClock(day(0))
    a = ml.open(tmp_path / "store", clock=fast)
    b = ml.open(tmp_path / "store", clock=slow)
    fast.set(day(5))
    first = a.write(fact("user:1", "plan", "Pro", day(0)), by=MEMBER)
    slow.set(day(3))  # another machine, or a commit that landed only after a conflict retry
    late = b.propose(fact("user:2", "plan", "Basic", day(0)), by=AGENT)
    assert late.version is not None and first.version is not None and late.version > first.version
    assert late.known_since is not None and first.known_since is not None and late.known_since >= first.known_since

    fresh = ml.open(tmp_path / "store", clock=SimClock(day(0)))
    for s in (a, b, fresh):
        s.lake.refresh()
        readings = [c.committed_at for _, c in sorted(memory_versions(s, "fact").items())]
        assert readings == sorted(readings)
        known = s.lake.known_rows("fact")
        for v, commit in memory_versions(s, "fact").items():
            at = known.filter(pc.less_equal(known.column("known_since"), commit.committed_at))
            last = present(s.lake.memory_commit_at("fact", commit.committed_at)).version
            assert ids_of(s.lake.load_as_version("fact", v)) <= ids_of(at)
            assert ids_of(s.lake.load_as_version("fact", last)) == ids_of(at)
    proposals = fresh.vis.rows("fact", AGENT, Basis(known_at=day(4), valid_at=day(4)), include_proposals=True)
    assert late.record_id not in ids_of(proposals)  # it landed after day 5's commit: not known on day 4
