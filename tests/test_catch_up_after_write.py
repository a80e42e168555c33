"""A small write takes its rows into what reads built for its org (`catch_up.after_write`),
so the next read finds them there; a write builds nothing a read has not built; a big
commit, a write beside another and ``catch_up="read"`` leave every step to the read; and
what a reader is served is the same whoever took the steps."""

import logging
from datetime import UTC, datetime, timedelta

import pytest

import memory_lakehouse as ml
from memory_lakehouse.catch_up import CATCH_UP_ROWS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEAD = ml.Principal("lead", ml.Scope("acme"), role="steward")
ANN = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
BOB = ml.Principal("bob", ml.Scope("acme", "support", "t1", "bob"), role="member")
OTHER = ml.Principal("olga", ml.Scope("globex"), role="steward")


def _store(path, now, **options):
    return ml.open(path, clock=lambda: now[0], embedder=ml.HashingEmbedder(), **options)


def _fact(subject, value, scope=None):
    return ml.Fact(subject, "plan", value, T0, source="crm", scope=scope or ml.Scope("acme", "support"))


def _served(store, who):
    """What *who* is served: its recall's rows with their scores, and `get_fact` of each
    subject. (Record ids are a store's own, and they break ties of score: the rows are
    sorted by score, then content.)"""
    recalled = store.recall("plan", by=who, k=20)
    hits = sorted((-h.score, h.record.subject, h.record.value, str(h.record.scope)) for h in recalled)
    facts = {s: getattr(store.get_fact(s, "plan", by=who), "value", None) for s in ("user:1", "user:2", "user:3")}
    return hits, facts


def _seeded(path, now, **options):
    store = _store(path, now, **options)
    store.write_many([_fact("user:1", "Free"), _fact("user:2", "Pro", ml.Scope("acme"))], by=LEAD)
    store.write(ml.Fact("user:9", "plan", "Team", T0, source="crm"), by=OTHER)
    _served(store, ANN)  # a read builds the org's heads, index partition, BM25 model and position map
    return store


def test_a_small_write_takes_its_rows_into_the_heads_and_index_the_next_read_finds(tmp_path):
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    now[0] += timedelta(hours=1)
    written: list[str] = []
    with store.tracer(written.append):
        store.write(_fact("user:1", "Pro", ml.Scope("acme", "support", "t1")), by=LEAD)
    assert any("advanced by the rows written since, by the write" in line for line in written), written
    assert any("index acme: added 1 row(s)" in line for line in written), written
    now[0] += timedelta(minutes=5)
    read: list[str] = []
    with store.tracer(read.append):
        hits, facts = _served(store, BOB)
    assert facts["user:1"] == "Pro"  # read-your-writes, by another reader of the org
    assert not any("advanced by the rows written since" in line for line in read), read
    assert not any("added" in line and "row(s) newer than the partition" in line for line in read), read
    assert any("picked from the org's slot heads (from cache" in line for line in read), read
    fresh = _store(tmp_path / "s", now)
    assert _served(fresh, BOB) == (hits, facts)


BOT = ml.Principal("bot", ml.Scope("acme", "support"), role="agent")


def _approved(store):
    proposal = store.propose(_fact("user:3", "Team"), by=BOT)
    return store.approve(proposal.record_id, by=LEAD)


def _captured(store):
    said = [{"role": "user", "text": "I prefer window seats on long flights"}]
    return store.capture("s-1", said, by=LEAD, subject="user:3", scope=ml.Scope("acme", "support")).result()


@pytest.mark.parametrize("flow", [_approved, _captured], ids=["approve", "capture"])
def test_an_approval_and_a_capture_take_their_rows_in_as_a_write_does(tmp_path, flow):
    """Every commit goes through what follows a commit (`store._committed`): an approved
    proposal and a conversation's captured memory are the next read's to find, as a
    write's are (the capture's turns and extracted record go to kinds no read has built
    heads of: only the index takes them in)."""
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    now[0] += timedelta(hours=1)
    written: list[str] = []
    with store.tracer(written.append):
        flow(store)
    assert any("index acme: added 1 row(s)" in line for line in written), written
    if flow is _approved:
        assert any("heads of fact in acme" in line and "by the write" in line for line in written), written
    read: list[str] = []
    with store.tracer(read.append):
        got = store.recall("Team window seats", by=BOB, k=20)
    assert not any("row(s) newer than the partition" in line for line in read), read
    assert not any("advanced by the rows written since" in line and "by the write" not in line for line in read)
    assert ("Team" if flow is _approved else "window seats") in " ".join(h.text for h in got)


def test_a_write_builds_nothing_no_read_has_built(tmp_path):
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    lines: list[str] = []
    with store.tracer(lines.append):
        store.write(ml.Fact("user:8", "plan", "Pro", T0, source="crm"), by=OTHER)  # globex: never read
    assert lines == []  # no query, no history, no index build
    assert "globex" not in store.retriever._orgs or store.retriever._orgs["globex"].partition is None
    assert not store.vis._heads.get(("fact", "globex"))


@pytest.mark.parametrize("how", ["big commit", "catch_up=read"])
def test_a_big_commit_or_catch_up_read_leaves_the_steps_to_the_read(tmp_path, how):
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now, **({"catch_up": "read"} if how == "catch_up=read" else {}))
    now[0] += timedelta(hours=1)
    many = CATCH_UP_ROWS + 1 if how == "big commit" else 1
    written: list[str] = []
    with store.tracer(written.append):
        store.write_many([_fact(f"user:{10 + i}", "Pro") for i in range(many)], by=LEAD)
    assert written == []
    read: list[str] = []
    with store.tracer(read.append):
        hits, facts = _served(store, BOB)
    assert any("advanced by the rows written since" in line for line in read), read
    assert any(f"index acme: added {many} row(s)" in line for line in read), read
    assert _served(_store(tmp_path / "s", now), BOB) == (hits, facts)


def test_a_write_finishing_beside_another_leaves_the_steps_to_the_read(tmp_path):
    """Writers in many threads (an agent serving many users) leave the steps to the reads,
    which take the rows of many commits in one advance: a write that finishes while
    another write of the store is under way does not catch up."""
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    now[0] += timedelta(hours=1)
    written: list[str] = []
    store._writes_in_flight.enter()  # another thread's write, still under way
    with store.tracer(written.append):
        store.write(_fact("user:1", "Pro"), by=LEAD)
    store._writes_in_flight.leave()
    assert written == []
    read: list[str] = []
    with store.tracer(read.append):
        assert _served(store, BOB)[1]["user:1"] == "Pro"
    assert any("advanced by the rows written since" in line for line in read), read
    written.clear()
    with store.tracer(written.append):  # alone again: the write catches up
        store.write(_fact("user:2", "Pro"), by=LEAD)
    assert any("by the write" in line for line in written), written


def test_who_takes_the_steps_changes_nothing_a_reader_is_served(tmp_path):
    """The same writes and reads on two stores, one per ``catch_up``: every read agrees."""
    served = {}
    for mode in ("write", "read"):
        now = [T0 + timedelta(days=3)]
        store = _seeded(tmp_path / mode, now, catch_up=mode)
        scopes = [ml.Scope("acme"), ml.Scope("acme", "support", "t1"), ml.Scope("acme", "support", "t1", "bob")]
        out = []
        for step in range(12):
            now[0] += timedelta(minutes=7)
            result = store.write(_fact(f"user:{1 + step % 3}", f"v{step}", scopes[step % 3]), by=LEAD)
            if step % 4 == 3:  # a retraction: an advance cannot take it, the read queries
                store.retract(result.record_id, by=LEAD, reason="wrong")
            out += [_served(store, who) for who in (ANN, BOB)]
        served[mode] = out
    assert served["write"] == served["read"]
    assert any(hits for hits, _ in served["write"])


def test_a_failed_catch_up_leaves_the_write_standing(tmp_path, monkeypatch, caplog):
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store.vis, "catch_up", broken)
    with caplog.at_level(logging.WARNING):
        result = store.write(_fact("user:3", "Pro"), by=LEAD)
    assert result.action == "inserted"
    assert "catching up after a write failed" in caplog.text and "disk on fire" in caplog.text
    monkeypatch.undo()
    assert _served(store, BOB)[1]["user:3"] == "Pro"  # the read took the steps itself


def test_catch_up_names_its_modes():
    with pytest.raises(ml.ValidationError, match="catch_up must be one of"):
        ml.open("/nonexistent", catch_up="later")


def test_a_catch_up_mode_set_while_serving_is_checked_and_a_bad_one_changes_nothing(tmp_path):
    """`store.catch_up` may change while the store serves; a misspelt mode is refused, not
    taken for "read" (which would quietly move every small write's steps to its reader)."""
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    with pytest.raises(ml.ValidationError, match="catch_up must be one of") as refused:
        store.catch_up = "writes"
    assert refused.value.field == "catch_up"
    assert store.catch_up == "write"
    written: list[str] = []
    with store.tracer(written.append):
        store.write(_fact("user:3", "Pro"), by=LEAD)
    assert any("advanced by the rows written since" in line for line in written), written  # still the write's
    store.catch_up = "read"
    assert store.catch_up == "read"
