"""The org's slot heads (`heads.OrgHeads`) serve every reader exactly what the per-reader
visibility query serves: randomised stores with supersessions at many scopes, ended and
expiring versions, retractions, forgets and purges, read by many principals at many bases
(and again after every change), each read compared with the plain query."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from _support import present

import memory_lakehouse as ml
from memory_lakehouse.query import bases_table

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ORGS = ("acme", "globex")
SUBJECTS = [f"user:{i}" for i in range(6)]


def _scopes(org):
    out = [ml.Scope(org), ml.Scope(org, "support"), ml.Scope(org, "sales")]
    out += [ml.Scope(org, "support", t) for t in ("t1", "t2")] + [ml.Scope(org, "sales", "t1")]
    out += [ml.Scope(org, "support", "t1", a) for a in ("ann", "bob")] + [ml.Scope(org, "support", "t2", "ann")]
    return out


def _readers():
    out = []
    for org in ORGS:
        for i, scope in enumerate(_scopes(org)):
            out.append(ml.Principal(f"r{i}-{org}", scope, role="member"))
    out.append(ml.Principal("stray", ml.Scope("acme", "support", "t9", "zed"), role="member"))  # unseen levels
    return out


def _slow(store, kind, principal, basis, subject=None, filters=None):
    """The per-reader query, straight (no remembered result, no heads)."""
    rows = store.vis.visible(kind, bases_table([("read", principal, basis, subject)]), filters=filters)
    return sorted(rows.column("record_id").to_pylist())


def _fast(store, kind, principal, basis, subject=None, filters=None):
    rows = store.vis.rows(kind, principal, basis, subject=subject, filters=filters)
    return sorted(rows.column("record_id").to_pylist())


def _compare(store, rng, readers, bases, *, reads=8):
    for _ in range(reads):
        who = rng.choice(readers)
        basis = rng.choice(bases)
        for kind, subject, filters in (
            ("fact", None, None),
            ("fact", rng.choice(SUBJECTS), None),
            ("fact", rng.choice(SUBJECTS), {"attribute": rng.choice(["plan", "tier"])}),
            ("fact", None, {"attribute": "plan"}),
            ("preference", None, None),
            ("note", None, {"key": rng.choice(["Topic", "topic", "step"])}),
        ):
            assert _fast(store, kind, who, basis, subject, filters) == _slow(
                store, kind, who, basis, subject, filters
            ), (kind, who.scope, basis.describe(), subject, filters)


def _random_write(store, rng, now, writers):
    org = rng.choice(ORGS)
    scope = rng.choice(_scopes(org))
    subject = rng.choice(SUBJECTS)
    start = T0 + timedelta(days=rng.randrange(0, 40))
    roll = rng.random()
    record: ml.Envelope
    if roll < 0.55:
        record = ml.Fact(
            subject,
            rng.choice(["plan", "tier"]),
            rng.choice(["Free", "Pro", "Team"]),
            start,
            valid_to=start + timedelta(days=rng.randrange(1, 30)) if rng.random() < 0.2 else None,
            expires_at=now[0] + timedelta(days=rng.randrange(1, 20)) if rng.random() < 0.15 else None,
            source="crm",
            scope=scope,
        )
    elif roll < 0.8:
        record = ml.Preference(
            subject,
            "tone",
            rng.choice(["brief", "long"]),
            start,
            source="chat",
            scope=scope,
            ttl=timedelta(days=rng.randrange(5, 60)),
        )
    else:  # a key spelled two ways: one slot (slots fold case), two spellings of the filter column
        record = ml.Note(
            "s1", rng.choice(["Topic", "topic", "step"]), rng.choice(["a", "b"]), scope=scope, valid_from=start
        )
    try:
        return store.write(record, by=writers[org])
    except ml.StaleGeneration:  # history of a subject forgotten since: refused (issue 10), not a read question
        return None


@pytest.mark.parametrize("seed", [1, 2])
def test_every_reader_at_every_basis_gets_what_the_per_reader_query_returns(tmp_path, seed):
    rng = random.Random(seed)
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    writers = {org: ml.Principal(f"lead-{org}", ml.Scope(org), role="steward") for org in ORGS}
    readers = _readers()
    written, bases = [], []
    for step in range(60):
        now[0] += timedelta(hours=rng.randrange(1, 30))
        result = _random_write(store, rng, now, writers)
        if result is not None and result.action != "duplicate":
            written.append((result, result.scope.org))
        if step % 10 == 7 and written:  # retract something
            target, org = rng.choice(written)
            try:
                store.retract(target.record_id, by=writers[org], reason="wrong")
            except ml.LakehouseError:
                pass
        if step % 20 == 19:
            store.forget(rng.choice(SUBJECTS), by=writers[rng.choice(ORGS)], reason="erasure request")
        if step % 15 == 14:
            bases.append(store._basis(None, None, None))  # now, then later a past basis
            bases.append(
                store._basis(None, T0 + timedelta(days=rng.randrange(0, 40)), T0 + timedelta(days=rng.randrange(0, 60)))
            )
            _compare(store, rng, readers, bases + [store._basis(None, None, None)])
    store.purge(by=writers["acme"])
    _compare(store, rng, readers, bases + [store._basis(None, None, None)], reads=16)


def test_a_reader_of_an_org_with_no_rows_of_a_kind_sees_nothing_without_a_query(tmp_path):
    store = ml.open(tmp_path / "s", clock=lambda: T0, embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    store.write(ml.Fact("user:1", "plan", "Pro", T0, source="crm"), by=lead)
    other = ml.Principal("x", ml.Scope("globex", "support"), role="member")
    lines: list[str] = []
    with store.tracer(lines.append):
        assert store.get_fact("user:1", "plan", by=other) is None
    assert not any("SELECT" in line for line in lines)


def test_one_query_serves_many_readers_of_an_org_at_one_basis(tmp_path):
    store = ml.open(tmp_path / "s", clock=lambda: T0 + timedelta(days=1), embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    for i in range(5):
        store.write(
            ml.Fact(f"user:{i}", "plan", "Pro", T0, source="crm", scope=ml.Scope("acme", "support", f"t{i}")), by=lead
        )
    queries = []
    with store.tracer(lambda line: queries.append(line) if "SELECT" in line else None):
        for i in range(5):
            reader = ml.Principal(f"a{i}", ml.Scope("acme", "support", f"t{i}", f"a{i}"), role="member")
            assert present(store.get_fact(f"user:{i}", "plan", by=reader)).value == "Pro"
            assert store.get_fact(f"user:{(i + 1) % 5}", "plan", by=reader) is None  # a sibling team's row
    assert len(queries) == 1
