"""The visible set is piecewise constant in time: a remembered result is reused only
while no row boundary (known_since, valid_from, valid_to, expires_at) lies between the
bases, and never after a write or a forget."""

import dataclasses
from datetime import UTC, datetime, timedelta

import memory_lakehouse as ml

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _store(tmp_path, now):
    return ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())


def test_a_second_read_between_boundaries_comes_from_the_cache_and_agrees(tmp_path):
    now = [T0]
    store = _store(tmp_path, now)
    alice = ml.Principal("alice", ml.Scope("acme", "support"), role="member")
    store.write(ml.Preference("user:1", "tone", "brief", T0, source="chat", ttl=timedelta(days=10)), by=alice)
    lines: list[str] = []
    with store.tracer(lines.append):
        now[0] = T0 + timedelta(days=1)
        first = store.get_fact("user:1", "tone", by=alice, kind="preference")
        now[0] = T0 + timedelta(days=2)
        second = store.get_fact("user:1", "tone", by=alice, kind="preference")
    assert first.record_id == second.record_id
    assert any("from cache" in line for line in lines)


def test_a_read_across_an_expiry_is_not_served_from_the_cache(tmp_path):
    now = [T0 + timedelta(days=1)]
    store = _store(tmp_path, now)
    alice = ml.Principal("alice", ml.Scope("acme", "support"), role="member")
    store.write(ml.Preference("user:1", "tone", "brief", T0, source="chat", ttl=timedelta(days=10)), by=alice)
    assert store.get_fact("user:1", "tone", by=alice, kind="preference") is not None
    now[0] = T0 + timedelta(days=11)  # past expires_at: a boundary lies between the two reads
    assert store.get_fact("user:1", "tone", by=alice, kind="preference") is None


def test_a_write_or_a_forget_invalidates_the_cache_at_once(tmp_path):
    now = [T0]
    store = _store(tmp_path, now)
    alice = ml.Principal("alice", ml.Scope("acme", "support"), role="curator")
    dpo = ml.Principal("dpo", ml.Scope("acme"), role="steward")
    store.write(ml.Fact("user:1", "plan", "Free", T0, source="crm"), by=alice)
    assert store.get_fact("user:1", "plan", by=alice).value == "Free"
    store.write(ml.Fact("user:1", "plan", "Pro", T0, source="crm"), by=alice)  # same valid_from: later commit wins
    assert store.get_fact("user:1", "plan", by=alice).value == "Pro"
    store.forget("user:1", by=dpo, reason="erasure request")
    assert store.get_fact("user:1", "plan", by=alice) is None


def test_purge_drops_every_remembered_read_result(tmp_path):
    """Remembered results hold whole rows: after a purge none may stay in memory."""
    now = [T0]
    store = _store(tmp_path, now)
    alice = ml.Principal("alice", ml.Scope("acme", "support"), role="curator")
    dpo = ml.Principal("dpo", ml.Scope("acme"), role="steward")
    store.write(ml.Fact("user:9", "email", "canary-9@example.org", T0, source="crm"), by=alice)
    store.write(ml.Fact("user:10", "plan", "Pro", T0, source="crm"), by=alice)
    store.get_fact("user:9", "email", by=alice)
    store.get_fact("user:10", "plan", by=alice)
    assert store.vis._cache or store.vis._heads  # white-box: remembered results exist before the purge
    store.forget("user:9", by=dpo, reason="erasure request")
    store.purge(by=dpo)
    assert not store.vis._cache and not store.vis._heads


def test_a_subject_picked_from_the_readers_visible_set_matches_the_narrowed_query(tmp_path):
    """Repeated reads at one basis are served from the reader's whole visible set; every
    slot must come out exactly as the subject-narrowed query returns it: supersession,
    the most specific scope, retraction, expiry, forgetting and sibling scopes included."""
    now = [T0 + timedelta(days=30)]
    store = _store(tmp_path, now)
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    dpo = ml.Principal("dpo", ml.Scope("acme"), role="steward")
    team, sibling = ml.Scope("acme", "support", "tier2"), ml.Scope("acme", "support", "tier1")
    reader = ml.Principal("reader", ml.Scope("acme", "support", "tier2", "ann"), role="member")
    written = []
    for i in range(12):
        subject = f"user:{i}"
        written.append(store.write(ml.Fact(subject, "plan", "Free", T0, source="crm", scope=ml.Scope("acme")), by=lead))
        if i % 2:
            store.write(ml.Fact(subject, "plan", "Pro", T0 + timedelta(days=i), source="crm", scope=team), by=lead)
        if i % 3 == 0:
            store.write(ml.Fact(subject, "plan", "Team", T0 + timedelta(days=1), source="crm", scope=sibling), by=lead)
        if i % 4 == 1:
            store.write(
                ml.Fact(subject, "region", "EU", T0, source="crm", scope=team, expires_at=T0 + timedelta(days=20)),
                by=lead,
            )
    store.retract(written[5].record_id, by=lead, reason="wrong plan")
    store.forget("user:7", by=dpo, reason="erasure request")

    def narrowed(subject, attribute):
        basis = store._basis(None, None, None)
        bases = ml.query.bases_table([("read", reader, basis, subject)])
        rows = store.vis.visible("fact", bases, filters={"attribute": attribute})
        return rows.column("record_id").to_pylist()

    lines = []
    with store.tracer(lambda message, *_: lines.append(message)):
        for _ in range(2):
            for i in range(12):
                for attribute in ("plan", "region"):
                    fact = store.get_fact(f"user:{i}", attribute, by=reader)
                    assert ([fact.record_id] if fact else []) == narrowed(f"user:{i}", attribute), (i, attribute)
    assert any("picked from the org's slot heads (from cache" in line for line in lines)


def test_remembered_results_stay_within_the_byte_budget(tmp_path):
    now = [T0 + timedelta(days=1)]
    store = _store(tmp_path, now)
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    store.write_many([ml.Fact(f"user:{i}", "plan", "x" * 200, T0, source="crm") for i in range(50)], by=lead)
    store.vis.budget = dataclasses.replace(store.vis.budget, results=4096)
    readers = [ml.Principal(f"r{i}", ml.Scope("acme", f"team{i}"), role="member") for i in range(6)]
    for reader in readers:
        for i in range(3):
            assert store.get_fact(f"user:{i}", "plan", by=reader).value == "x" * 200
    cache = store.vis._cache
    assert store.vis._cache_bytes == sum(entry[3].nbytes for entry in cache.values())
    assert store.vis._cache_bytes <= 4096 or len(cache) == 1


def test_a_write_to_another_org_keeps_a_readers_remembered_results_and_one_to_its_org_drops_them(tmp_path):
    now = [T0 + timedelta(days=1)]
    store = _store(tmp_path, now)
    acme = ml.Principal("lead", ml.Scope("acme"), role="curator")
    globex = ml.Principal("g-lead", ml.Scope("globex"), role="curator")
    reader = ml.Principal("ann", ml.Scope("acme", "support"), role="member")
    store.write_many([ml.Fact(f"user:{i}", "plan", "Free", T0, source="crm") for i in range(5)], by=acme)
    for i in range(3):
        store.get_fact(f"user:{i}", "plan", by=reader)  # the reader's visible set is remembered
    lines = []
    with store.tracer(lambda message, *_: lines.append(message)):
        now[0] += timedelta(minutes=1)
        store.write(ml.Fact("user:0", "plan", "Enterprise", T0, source="crm"), by=globex)  # another org
        assert store.get_fact("user:3", "plan", by=reader).value == "Free"
        assert any("picked from the org's slot heads (from cache" in line for line in lines)
        lines.clear()
        now[0] += timedelta(minutes=1)
        store.write(ml.Fact("user:3", "plan", "Pro", T0 + timedelta(hours=1), source="crm"), by=acme)  # its org
        assert store.get_fact("user:3", "plan", by=reader).value == "Pro"
        assert not any("remembered visible set" in line for line in lines)
        # the cell the reader's result was remembered in is gone: the write advanced a new one (`catch_up`)
        assert any("advanced by the rows written since, by the write" in line for line in lines)
    assert store.get_fact("user:0", "plan", by=globex).value == "Enterprise"
    assert store.get_fact("user:0", "plan", by=reader).value == "Free"


def test_a_mirror_copied_by_more_threads_serves_the_same_and_serving_goes_back_to_one(tmp_path, monkeypatch):
    """A big copy into the mirror (a store's first read of a kind) runs on `COPY_THREADS`;
    the reads after it run on `DUCKDB_THREADS` again, and see what a one-thread copy shows:
    supersession, scope and a forget included."""
    from memory_lakehouse import query

    now = [T0 + timedelta(days=3)]
    writer = _store(tmp_path, now)
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    dpo = ml.Principal("dpo", ml.Scope("acme"), role="steward")
    reader = ml.Principal("ann", ml.Scope("acme", "support", "tier2", "ann"), role="member")
    for i in range(12):
        writer.write(ml.Fact(f"user:{i}", "plan", "Free", T0, source="crm"), by=lead)
        writer.write(ml.Fact(f"user:{i}", "plan", f"Pro {i}", T0 + timedelta(days=1), source="crm"), by=lead)
    writer.write(ml.Fact("user:3", "plan", "Team", T0, source="crm", scope=reader.scope), by=lead)
    writer.forget("user:5", by=dpo, reason="erasure request")
    writer.close()

    def served(rows_for_more_threads: int) -> list[tuple[str | None, object] | None]:
        monkeypatch.setattr(query, "COPY_THREADS_ROWS", rows_for_more_threads)
        store = _store(tmp_path, now)
        bases = (None, T0 + timedelta(hours=12))  # now; before the Pro rows in world time
        facts = [store.get_fact(f"user:{i}", "plan", by=reader, valid_at=at) for i in range(12) for at in bases]
        threads = store.vis.con.execute("SELECT current_setting('threads')").fetchone()[0]
        store.close()
        assert threads == query.DUCKDB_THREADS
        return [None if f is None else (f.record_id, f.value) for f in facts]

    copied_by_more = served(1)
    assert copied_by_more == served(10**9)
    values = [None if f is None else f[1] for f in copied_by_more]
    assert values[2:4] == ["Pro 1", "Free"]  # superseded in world time
    assert values[6:8] == ["Team", "Team"]  # ann's own row outranks the org's
    assert values[10:12] == [None, None]  # forgotten at every basis
