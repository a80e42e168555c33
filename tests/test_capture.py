"""Capture: turns, extraction boundaries, reconcile (sightings), workers across a forget, forgetting a speaker."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from _forgetting import canary, files_holding
from _support import AGENT, CURATOR, MEMBER, STEWARD, TIER2, SimClock, day

import memory_lakehouse as ml
from memory_lakehouse.capture import ExtractionTask, ExtractionWorker, RuleExtractor, classify

USER = "user:42"
CONVERSATION_KINDS = ["turn", "memory", "fact", "preference", "summary", "sighting"]


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def store(tmp_path, clock) -> ml.MemoryStore:
    return ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())


def _say(*lines: str, role: str = "user") -> list[dict]:
    return [{"role": role, "text": line} for line in lines]


def _derived_from(store: ml.MemoryStore, turn_id: str) -> list[dict]:
    store.lake.refresh()
    return [
        r
        for kind in ("memory", "fact", "preference")
        for r in store.lake.known_rows(kind).to_pylist()
        if turn_id in (r["derived_from"] or [])
    ]


# ---------------------------------------------------------------------------- boundaries

TRANSCRIPT = [  # (line, kept?, the rule that decides)
    ("Hi there!", False, "greeting"),
    ("Thanks so much, that's great!", False, "greeting"),
    ("ok cool", False, "greeting"),
    ("Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'pool'", False, "trace"),
    ("2026-10-04 12:00:01 DEBUG acquired connection 17 from pool", False, "trace"),
    ("maybe it's the pool?", False, "speculation"),
    ("I think the cache might be stale", False, "speculation"),
    ("Could you check the logs for me?", False, "speculation"),
    ("my api key is sk_live_4eC39HqLyjWDarjtT1zdp7dc", False, "secret"),
    ("The weather was lovely on the drive over.", False, "other"),
    ("I prefer window seats on long flights", True, "preference"),
    ("My preferred test runner is pytest with parallel execution", True, "preference"),
    ("Please never call me before 9am", True, "preference"),
    ("I can't take meetings on Fridays", True, "constraint"),
    ("Confirmed: the prod connection pool size is 20", True, "configuration"),
    ("max_connections is set to 200 in prod", True, "configuration"),
    ("I live in Seattle", True, "fact"),
    ("I'm on the Free Starter plan", True, "fact"),
    ("I just upgraded to Enterprise Pro!", True, "fact"),
    ("Actually, I moved to Austin", True, "correction"),
    ("We need to ship the billing migration by Friday", True, "goal"),
]


@pytest.mark.parametrize(
    "line, kept, rule", TRANSCRIPT, ids=[f"{r}:{'keep' if k else 'drop'}:{n}" for n, (_, k, r) in enumerate(TRANSCRIPT)]
)
def test_each_extraction_boundary_keeps_or_drops_its_line(line, kept, rule):
    verdict = classify(line) if "\n" not in line else classify(line.splitlines()[0])
    assert (verdict.keep, verdict.rule) == (kept, rule)


def test_a_transcript_keeps_exactly_its_signal_lines(store):
    job = store.capture("s-boundaries", _say(*(line for line, _, _ in TRANSCRIPT)), by=MEMBER, subject=USER)
    assert job.result().status == "written"
    for (line, kept, rule), turn in zip(TRANSCRIPT, job.turns, strict=True):
        assert bool(_derived_from(store, turn.record_id)) == kept, (line, rule)


def test_an_api_key_pasted_in_a_turn_never_reaches_the_disk_nor_memory(store):
    key = "sk_live_" + canary()[6:] + "abcdef"
    job = store.capture("s-key", _say(f"here is my key {key} for the deploy"), by=MEMBER, subject=USER)
    assert job.turns[0].redacted == ("api_key",)
    assert not job.result().results
    assert not files_holding([store.root], [key])


# ---------------------------------------------------------------------------- reconcile


def test_a_duplicate_bumps_seen_count_and_last_seen_with_no_new_version(store, clock):
    first = store.capture("s1", _say("I prefer window seats on long flights"), by=MEMBER, subject=USER).result()
    memory = first.results[0]
    assert (memory.kind, memory.action) == ("memory", "inserted")
    said_first = clock.now
    versions = store.lake.views["memory"].version
    clock.advance(days=3)
    again = store.capture("s2", _say("i prefer window seats on long flights."), by=MEMBER, subject=USER).result()
    assert [(r.action, r.record_id) for r in again.results] == [("duplicate", memory.record_id)]
    assert again.sightings == 1
    store.lake.refresh()
    assert store.lake.views["memory"].version == versions  # no new version
    seen = store.seen(memory.record_id, by=MEMBER)
    assert (seen.count, seen.first_seen, seen.last_seen) == (2, said_first, clock.now)
    before = store.seen(memory.record_id, by=MEMBER, as_of=said_first + timedelta(days=1))
    assert (before.count, before.last_seen) == (1, said_first)  # the sighting is not known before it was made
    # the same turn extracted again (a redelivered task) is no new sighting
    rerun = store.extract(
        ExtractionTask.from_dict(
            store.capture(
                "s2",
                [
                    {
                        "role": "user",
                        "text": "i prefer window seats on long flights.",
                        "position": 0,
                        "said_at": clock.now,
                    }
                ],
                by=MEMBER,
                subject=USER,
            ).task.to_dict()
        ),
        by=MEMBER,
    )
    assert rerun.sightings == 0 and store.seen(memory.record_id, by=MEMBER).count == 2


def test_a_conflict_supersedes_with_a_pointer_and_the_novel_is_inserted(store, clock):
    old = store.capture("s1", _say("I live in Seattle"), by=MEMBER, subject=USER).result().results[0]
    clock.advance(days=30)
    res = store.capture(
        "s2", _say("I moved to Austin", "I want to run the Lisbon marathon by October"), by=MEMBER, subject=USER
    ).result()
    city, goal = res.results
    assert (city.kind, city.action, city.supersedes) == ("fact", "superseded", old.record_id)
    assert (goal.kind, goal.action) == ("memory", "inserted")
    assert store.get_fact(USER, "city", by=MEMBER).value == "Austin"
    assert store.get_fact(USER, "city", by=MEMBER, as_of=day(1)).value == "Seattle"
    row = store.lake.known_rows("fact").to_pylist()[-1]
    assert row["reason"] and row["supersedes"] == old.record_id


def test_memories_of_one_subject_never_supersede_each_other(store):
    res = store.capture("s1", _say("I prefer aisle seats", "I prefer tea to coffee"), by=MEMBER, subject=USER).result()
    assert [r.action for r in res.results] == ["inserted", "inserted"]
    texts = {h.record.text for h in store.recall("prefer", by=MEMBER, subject=USER, kinds=["memory"], k=10)}
    assert texts == {"I prefer aisle seats", "I prefer tea to coffee"}


# ---------------------------------------------------------------------------- roles


def test_an_agents_capture_is_proposals_only(store):
    bot_scope_reader = ml.Principal("lead", TIER2, role="curator")
    job = store.capture("s-bot", _say("I prefer window seats on long flights"), by=AGENT, subject=USER)
    store.lake.refresh()
    assert {r["status"] for r in store.lake.known_rows("turn").to_pylist()} == {"proposed"}
    assert [r.action for r in job.result().results] == ["inserted"]
    assert {r["status"] for r in store.lake.known_rows("memory").to_pylist()} == {"proposed"}
    assert not store.recall("window seats", by=bot_scope_reader, kinds=CONVERSATION_KINDS, k=10)
    store.approve(job.result().results[0].record_id, by=CURATOR)
    assert store.recall("window seats", by=AGENT, kinds=["memory"], k=10)


def test_a_capture_without_the_right_role_raises_permission_denied(store):
    with pytest.raises(ml.PermissionDenied):
        store.capture("s", _say("I live in Seattle"), by=MEMBER, scope=TIER2)  # a member writes at its own scope
    with pytest.raises(ml.PermissionDenied):
        store.capture("s", _say("I live in Seattle"), by=AGENT, scope=ml.Scope("acme", "sales"))
    store.lake.refresh()
    assert store.lake.known_rows("turn").num_rows == 0


# ---------------------------------------------------------------------------- workers


class HeldExtractor(RuleExtractor):
    """The delayed job of seed 004: extraction waits until the test lets it go."""

    name = "held@1"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def extract(self, turns, subject=None):
        self.started.set()
        assert self.release.wait(60)
        return super().extract(turns, subject)


def test_a_worker_held_across_a_forget_drops_its_results(store):
    held = HeldExtractor()
    with ExtractionWorker() as worker:
        job = store.capture(
            "s1",
            _say("I live in Seattle", "I prefer window seats on long flights"),
            by=MEMBER,
            subject=USER,
            extractor=held,
            worker=worker,
        )
        assert held.started.wait(60) and not job.done()
        store.forget(USER, by=STEWARD, reason="erasure request")
        held.release.set()
        result = job.result(timeout=60)
    assert result.status == "dropped" and not result.results
    store.lake.refresh()
    assert store.lake.known_rows("memory").num_rows == store.lake.known_rows("fact").num_rows == 0


def test_a_worker_that_is_not_stale_writes_off_the_request_path(store):
    held = HeldExtractor()
    with ExtractionWorker() as worker:
        job = store.capture("s1", _say("I live in Seattle"), by=MEMBER, subject=USER, extractor=held, worker=worker)
        assert held.started.wait(60)
        assert store.get_fact(USER, "city", by=MEMBER) is None  # the request returned before extraction
        held.release.set()
        assert job.result(timeout=60).status == "written"
    assert store.get_fact(USER, "city", by=MEMBER).value == "Seattle"


def test_a_task_run_from_a_queue_after_a_forget_writes_nothing(store):
    job = store.capture("s1", _say("I live in Seattle"), by=MEMBER, subject=USER, worker=_Queue())
    message = job.task.to_dict()  # ids and generations only: what goes on the queue
    assert "Seattle" not in repr(message)
    store.forget(USER, by=STEWARD, reason="erasure request")
    assert store.extract(message, by=MEMBER).status == "dropped"


class _Queue:
    def submit(self, store, task, by, extractor):
        return None  # published; a consumer runs it later


@pytest.mark.slow
@pytest.mark.integration
def test_extraction_can_run_in_a_spawned_process(store):
    with ExtractionWorker(processes=1) as worker:
        job = store.capture("s1", _say("I live in Seattle"), by=MEMBER, subject=USER, worker=worker)
        assert job.result(timeout=300).status == "written"
    assert store.get_fact(USER, "city", by=MEMBER).value == "Seattle"


# ---------------------------------------------------------------------------- forgetting a speaker


def test_forgetting_a_speaker_removes_their_turns_and_everything_extracted_from_them(store, clock):
    can = canary()
    speaker, other = f"Dana{can[6:12]}", "Morgan"
    lines = [
        {"role": "user", "speaker": speaker, "text": f"I live in Seattle{can}"},
        {"role": "user", "speaker": other, "text": "I prefer tea to coffee"},
        {"role": "user", "speaker": speaker, "text": f"I prefer window seats {can}"},
    ]
    job = store.capture("s1", lines, by=MEMBER)
    first, first_turns = job.result(), job.turns
    assert first.count("inserted") == 3
    clock.advance(days=2)
    store.capture(
        "s2",
        [
            {"role": "user", "speaker": speaker, "text": f"I prefer window seats {can}"},
            {"role": "user", "speaker": speaker, "text": f"I moved to Austin{can}"},
        ],
        by=MEMBER,
    ).result()
    summary = store.write(
        ml.Summary(
            "s1",
            f"Dana lives in Seattle and likes window seats {can}",
            derived_from=tuple(t.record_id for t in first_turns),
            source="summariser@1",
            subject="session:s1",
        ),
        by=MEMBER,
    )
    clock.advance(days=1)
    times = [day(0, 1), day(2, 1), clock.now]

    def theirs(**basis):
        out = []
        for kind in CONVERSATION_KINDS:
            rows = store.vis.rows(kind, MEMBER, store._basis(**basis))
            out += [r for r in rows.to_pylist() if r["subject"] == speaker or can in repr(r)]
        return out

    assert theirs()
    assert store.recall("window seats summary", by=MEMBER, kinds=["summary"], k=5)[0].record_id == summary.record_id
    store.forget(speaker, by=STEWARD, reason="erasure request")
    for t in times:
        assert theirs(as_of=t) == [] and theirs(known_at=t) == []
        assert all(
            can not in h.text
            for h in store.recall(
                f"Seattle window seats Austin {can}", by=MEMBER, kinds=CONVERSATION_KINDS, k=50, as_of=t
            )
        )
    assert store.recall("tea", by=MEMBER, kinds=["memory"], k=5)[0].record.subject == other  # the other speaker stays
    report = store.purge(by=STEWARD)
    assert report.verified, report.leftovers
    assert not files_holding([store.root], [can, speaker])


def test_a_restated_preference_lives_a_ttl_from_its_last_sighting_with_no_new_version(store, clock):
    line = "My preferred seat is the window"
    first = store.capture("s1", _say(line), by=MEMBER, subject=USER).result().results[0]
    assert first.kind == "preference"
    start = clock.now
    clock.advance(days=100)
    again = store.capture("s2", _say(line), by=MEMBER, subject=USER).result()
    assert [r.action for r in again.results] == ["duplicate"] and again.sightings == 1
    ttl = ml.Preference.__dataclass_fields__["ttl"].default
    assert store.lake.known_rows("preference").num_rows == 1  # no new version
    served = store.get_fact(USER, "seat", by=MEMBER, kind="preference", valid_at=start + ttl + timedelta(days=1))
    assert served is not None and served.record_id == first.record_id  # past its own expiry, refreshed by day 100
    assert store.get_fact(USER, "seat", by=MEMBER, kind="preference", valid_at=clock.now + ttl) is None
    # known_at before the sighting: the refresh was not known yet
    assert (
        store.get_fact(
            USER,
            "seat",
            by=MEMBER,
            kind="preference",
            known_at=start + timedelta(days=1),
            valid_at=start + ttl + timedelta(days=1),
        )
        is None
    )
    clock.set(start + ttl + timedelta(days=10))
    assert store.purge(by=STEWARD).rows.get("preference", 0) == 0  # purge honours the refreshed expiry
    assert store.get_fact(USER, "seat", by=MEMBER, kind="preference") is not None
