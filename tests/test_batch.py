"""store.batch(): many principals' records in one commit, each authorised by its own principal."""

from datetime import UTC, datetime

import pytest

import memory_lakehouse as ml

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _store(tmp_path):
    return ml.open(tmp_path / "s", clock=lambda: T0.replace(month=2), embedder=ml.HashingEmbedder())


def test_a_batch_of_many_principals_in_many_orgs_is_one_commit_visible_to_each_reader(tmp_path):
    store = _store(tmp_path)
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    bob = ml.Principal("bob", ml.Scope("globex", "sales", "t2", "bob"), role="member")
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    with store.batch() as b:
        b.write(ml.Fact("user:1", "plan", "Pro", T0, source="chat"), by=ann)
        b.write(ml.Fact("user:2", "plan", "Free", T0, source="chat"), by=bob)
        b.write(ml.Fact("user:3", "plan", "Team", T0, source="crm", scope=ml.Scope("acme", "support")), by=lead)
    assert b.result is not None and len(b.result) == 3 and len({r.txn_id for r in b.result}) == 1
    assert [r.scope for r in b.result] == [ann.scope, bob.scope, ml.Scope("acme", "support")]
    assert store.get_fact("user:1", "plan", by=ann).value == "Pro"
    assert store.get_fact("user:2", "plan", by=bob).value == "Free"
    assert store.get_fact("user:1", "plan", by=bob) is None  # another org
    assert store.get_fact("user:3", "plan", by=ann).value == "Team"
    commits = [c for c in store.lake.views["fact"].commits.values() if c.is_memory]
    assert len(commits) == 1 and commits[0].actor == "ann,bob,lead"


def test_a_record_its_principal_may_not_write_fails_the_whole_batch(tmp_path):
    store = _store(tmp_path)
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    bob = ml.Principal("bob", ml.Scope("globex", "sales", "t2", "bob"), role="member")
    with pytest.raises(ml.PermissionDenied):
        with store.batch() as b:
            b.write(ml.Fact("user:1", "plan", "Pro", T0, source="chat"), by=ann)
            b.write(ml.Fact("user:2", "plan", "Free", T0, source="chat", scope=ann.scope), by=bob)  # not bob's
    assert store.get_fact("user:1", "plan", by=ann) is None
    assert not [c for c in store.lake.views["fact"].commits.values() if c.is_memory]


def test_an_exception_inside_the_block_writes_nothing(tmp_path):
    store = _store(tmp_path)
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    with pytest.raises(RuntimeError):
        with store.batch() as b:
            b.write(ml.Fact("user:1", "plan", "Pro", T0, source="chat"), by=ann)
            raise RuntimeError("caller gave up")
    assert store.get_fact("user:1", "plan", by=ann) is None
    with pytest.raises(ml.StoreError):
        b.write(ml.Fact("user:1", "plan", "Pro", T0, source="chat"), by=ann)


def test_a_batch_reconciles_like_write_many_superseding_within_and_across_batches(tmp_path):
    store = _store(tmp_path)
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    with store.batch() as b:
        b.write(ml.Fact("user:1", "plan", "Free", T0, source="chat"), by=ann)
        b.write(ml.Fact("user:1", "plan", "Pro", T0.replace(day=2), source="chat"), by=ann)
    assert [r.action for r in b.result] == ["inserted", "superseded"]
    with store.batch() as b2:
        b2.write(ml.Fact("user:1", "plan", "Pro", T0.replace(day=3), source="chat"), by=ann)
        b2.write(ml.Fact("user:1", "plan", "Team", T0.replace(day=4), source="chat"), by=ann)
    assert [r.action for r in b2.result] == ["duplicate", "superseded"]
    assert store.get_fact("user:1", "plan", by=ann).value == "Team"
