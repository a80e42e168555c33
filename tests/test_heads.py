"""The org's slot heads (`heads.OrgHeads`) serve every reader exactly what the per-reader
visibility query serves: randomised stores with supersessions at many scopes, ended and
expiring versions, retractions, forgets and purges, read by many principals at many bases
(and again after every change, when the heads are advanced by the written rows), each
read compared with the plain query; and the positional take the fast paths read through."""

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest
from _forgetting import append_raw, stored_row
from _support import present
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse import query
from memory_lakehouse.lake import take_rows
from memory_lakehouse.query import bases_table

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ORGS = ("acme", "globex")
SUBJECTS = [f"user:{i}" for i in range(6)]


@pytest.fixture(autouse=True)
def histories_queried(monkeypatch):
    """Every org's history is read by its query here: the stores are small, so each would
    otherwise be built from its rows (`Visibility._few_rows`), and the tests count queries.
    Tests of histories built from rows set `query.HISTORY_FROM_ROWS` back."""
    monkeypatch.setattr(query, "HISTORY_FROM_ROWS", 0)


def _histories_from_rows(monkeypatch):
    monkeypatch.setattr(query, "HISTORY_FROM_ROWS", query.ADVANCE_ROWS)


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
        _compare_read(store, rng, rng.choice(readers), rng.choice(bases))


def _compare_read(store, rng, who, basis):
    """One reader at one basis: every read shape, from the heads and from the per-reader query."""
    for kind, subject, filters in (
        ("fact", None, None),
        ("fact", rng.choice(SUBJECTS), None),
        ("fact", rng.choice(SUBJECTS), {"attribute": rng.choice(["plan", "tier"])}),
        ("fact", None, {"attribute": "plan"}),
        ("preference", None, None),
        ("note", None, {"key": rng.choice(["Topic", "topic", "step"])}),
    ):
        slow = _slow(store, kind, who, basis, subject, filters)
        assert _fast(store, kind, who, basis, subject, filters) == slow, (
            kind,
            who.scope,
            basis.describe(),
            subject,
            filters,
        )
        # recall's read: any order (from the heads, snapshot order), the same rows
        unordered = store.vis.rows(
            kind, who, basis, subject=subject, filters=filters, columns=["record_id", "_row"], ordered=False
        )
        assert sorted(unordered.column("record_id").to_pylist()) == slow
        # recall's read: the positions alone, as numpy, the same rows
        at = store.vis.positions(kind, who, basis, subject=subject, filters=filters)
        ids = store.lake.all_rows(kind).column("record_id").take(at).to_pylist()
        assert sorted(ids) == slow, (kind, who.scope, basis.describe(), subject, filters)
        assert (np.diff(at) > 0).all(), (kind, who.scope, basis.describe(), subject, filters)
        store.vis.use_heads = False  # the per-reader query's positions: the same, in the same order
        try:
            assert store.vis.positions(kind, who, basis, subject=subject, filters=filters).tolist() == at.tolist()
        finally:
            store.vis.use_heads = True
        if subject is None and filters is None:  # served from the heads
            positions = unordered.column("_row").to_numpy()
            assert (np.diff(positions) > 0).all(), (kind, who.scope, basis.describe())


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


@pytest.mark.parametrize(
    ("seed", "cache", "queried"),
    [(1, None, False), (2, None, True), (1, 0, True), (8, 0, True), (3, 0, False)],
    ids=[
        "seed 1, histories from the rows",
        "seed 2",
        "seed 1, no read cache",
        "seed 8, no read cache",
        "seed 3, no read cache, histories from the rows",
    ],
)
def test_every_reader_at_every_basis_gets_what_the_per_reader_query_returns(
    tmp_path, monkeypatch, seed, cache, queried
):
    """With no room in the read caches (``read_cache_bytes=0``) every read goes through their
    eviction: whole orgs' cells, histories waiting in the window and admitted by counts. A
    store this small has every org's history built from its rows (`Visibility._few_rows`);
    with *queried*, each is read by the history's query instead."""
    if not queried:
        _histories_from_rows(monkeypatch)
    rng = random.Random(seed)
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), read_cache_bytes=cache)
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
    stats = store.read_cache_stats()
    if cache == 0 and queried:  # the paths under test ran
        assert stats.history_queries > 10 and stats.history_picks > 0 and stats.history_orgs == 1
    if not queried:
        assert stats.history_queries == 0 and stats.history_advances > 10, stats


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


def _reads_after_each_write(tmp_path, rng, *, minutes, read, lines=None, catch_up="write"):
    """A store after 70 random writes up to *minutes* apart, a retraction every 12th and a
    forget at the 36th; ``read(store, now, step)`` after each, traced into *lines* if given.
    *catch_up*: who advances the heads by a write's rows (`ml.open`), the write or the read."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), catch_up=catch_up)
    writers = {org: ml.Principal(f"lead-{org}", ml.Scope(org), role="steward") for org in ORGS}
    written = []
    with store.tracer(lines.append if lines is not None else lambda line: None):
        for step in range(70):
            now[0] += timedelta(minutes=rng.randrange(1, minutes))
            result = _random_write(store, rng, now, writers)
            if result is not None and result.action != "duplicate":
                written.append((result, result.scope.org))
            if step % 12 == 11 and written:
                target, org = rng.choice(written)
                try:
                    store.retract(target.record_id, by=writers[org], reason="wrong")
                except ml.LakehouseError:
                    pass
            if step == 35:
                store.forget(rng.choice(SUBJECTS), by=writers[rng.choice(ORGS)], reason="erasure request")
            read(store, now, step)
    return store


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_heads_advanced_by_each_write_serve_what_the_query_returns(tmp_path, seed):
    """A read after every write: the org's heads are advanced by the written rows (not queried
    again) whenever no older row's instant lies between the bases, and still match the query;
    seeds take turns at who advances them (``catch_up``: the write, or the read after it)."""
    rng = random.Random(seed)
    readers = _readers()
    lines: list[str] = []

    def read(store, now, step):
        _compare(store, rng, readers, [store._basis(None, None, None)], reads=2)

    _reads_after_each_write(tmp_path, rng, minutes=90, read=read, lines=lines, catch_up=("write", "read")[seed % 2])
    advanced = sum("advanced by the rows written since" in line for line in lines)
    assert advanced >= 20, advanced  # the path under test ran, before and after the forget
    assert any("advanced by the rows written since" in line for line in lines[len(lines) // 2 :])
    assert any("a retraction's slots picked again" in line for line in lines), "no cell followed a retraction"


@pytest.mark.parametrize("seed", [3, 9])
def test_histories_advanced_by_each_write_serve_what_the_query_returns(tmp_path, seed):
    """Reads at past bases after every write: the org's history is advanced by the written
    rows (not queried again) unless a retraction came in between or the ledger changed, and
    the heads picked from it at any basis still match the query, before and after a forget
    (whose ledger can hide appended rows)."""
    rng = random.Random(seed)
    readers = _readers()
    before_forget = []

    def read(store, now, step):
        past = [
            store._basis(
                None, now[0] - timedelta(hours=rng.randrange(1, 200)), T0 + timedelta(days=rng.randrange(0, 60))
            )
            for _ in range(2)
        ]
        _compare(store, rng, readers, past, reads=2)
        if step == 35:
            before_forget.append(store.read_cache_stats().history_advances)

    lines: list[str] = []
    store = _reads_after_each_write(tmp_path, rng, minutes=600, read=read, lines=lines)
    stats = store.read_cache_stats()
    assert stats.history_advances >= 30, stats  # the path under test ran, before and after the forget
    assert 10 <= before_forget[0] < stats.history_advances - 10, (before_forget, stats)
    assert any("(a retraction among them)" in line for line in lines), "no history advanced past a retraction"


def test_a_retraction_advances_the_orgs_history_instead_of_querying_it_again(tmp_path):
    """The org's history takes a retraction in (`OrgHistory.retracting`: the retracted
    version's ``retracted_since``): reads now and at past bases pick from it without a
    query, and get what the per-reader query returns: the version before the retracted one
    now, the retracted one at a basis before the retraction was known."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead-acme", ml.Scope("acme"), role="steward")
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    scope = ml.Scope("acme", "support")
    store.write(ml.Fact("user:1", "plan", "Free", T0, source="crm", scope=scope), by=lead)
    store.write(ml.Fact("user:2", "plan", "Team", T0, source="crm", scope=scope), by=lead)
    now[0] += timedelta(hours=1)
    pro = store.write(ml.Fact("user:1", "plan", "Pro", T0 + timedelta(days=2), source="crm", scope=scope), by=lead)
    now[0] += timedelta(hours=1)
    before = now[0]
    assert present(store.get_fact("user:1", "plan", by=ann, as_of=before - timedelta(minutes=30))).value == "Pro"
    assert store.read_cache_stats().history_queries == 1  # a past basis: the org's history, read once
    now[0] += timedelta(hours=1)
    store.retract(pro.record_id, by=lead, reason="entered on the wrong account")
    now[0] += timedelta(hours=1)
    lines: list[str] = []
    with store.tracer(lines.append):
        assert present(store.get_fact("user:1", "plan", by=ann)).value == "Free"
        assert present(store.get_fact("user:1", "plan", by=ann, as_of=before)).value == "Pro"
    assert store.read_cache_stats().history_queries == 1, lines
    assert any("(a retraction among them)" in line for line in lines), lines
    # retracted again (the version itself stays active): the earliest retraction known counts
    between = now[0]
    now[0] += timedelta(hours=1)
    store.retract(pro.record_id, by=lead, reason="still the wrong account")
    now[0] += timedelta(hours=1)
    assert present(store.get_fact("user:1", "plan", by=ann, as_of=between)).value == "Free"
    assert store.read_cache_stats().history_queries == 1
    bases = [store._basis(None, None, None), store._basis(before, None, None), store._basis(between, None, None)]
    bases.append(store._basis(None, now[0], T0))
    _compare(store, random.Random(1), [ann, lead], bases, reads=6)


def _pro_over_free(path, *, also=None, catch_up="write"):
    """A store where acme's user:1 plan was Free, then Pro (at ``before``), each read once now
    and once at a past basis (the org's cells and history held), the clock an hour on. *also*
    (a subject and a plan) is written beside the Free one. *catch_up* as for `ml.open`."""
    now = [T0 + timedelta(days=1)]
    store = ml.open(path, clock=lambda: now[0], embedder=ml.HashingEmbedder(), catch_up=catch_up)
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    scope = ml.Scope("acme", "support")
    store.write(ml.Fact("user:1", "plan", "Free", T0, source="crm", scope=scope), by=lead)
    if also is not None:
        store.write(ml.Fact(also[0], "plan", also[1], T0, source="crm", scope=scope), by=lead)
    now[0] += timedelta(hours=1)
    pro = store.write(ml.Fact("user:1", "plan", "Pro", T0 + timedelta(hours=2), source="crm", scope=scope), by=lead)
    now[0] += timedelta(hours=1)
    before = now[0]
    assert present(store.get_fact("user:1", "plan", by=ann)).value == "Pro"
    assert present(store.get_fact("user:1", "plan", by=ann, as_of=before - timedelta(minutes=30))).value == "Pro"
    now[0] += timedelta(hours=1)
    return store, now, lead, ann, pro, before


@pytest.mark.parametrize("catch_up", ["write", "read"])
def test_a_cell_follows_a_retraction_by_picking_its_slots_again_from_the_history(tmp_path, catch_up):
    """A retraction takes a head away: the cell at now is advanced by the rows written since,
    and the slots of the retraction are picked again from their versions in the org's history
    (`Visibility._repicked`, `OrgHeads.with_slots`), by the write or by the read after it.
    The version before the retracted one heads again (user:1: Free); a slot whose only version
    is retracted has no head left (user:2); every other slot keeps its head (user:3). No
    history is queried or advanced, and every reader at every basis gets what the per-reader
    query returns."""
    store, now, lead, ann, pro, before = _pro_over_free(tmp_path / "s", also=("user:2", "Team"), catch_up=catch_up)
    scope = ml.Scope("acme", "support")
    store.write(ml.Fact("user:3", "plan", "Basic", T0, source="crm", scope=scope), by=lead)
    assert present(store.get_fact("user:3", "plan", by=ann)).value == "Basic"  # the cell at now, advanced
    team = store.get_fact("user:2", "plan", by=ann)
    stats = store.read_cache_stats()
    lines: list[str] = []
    with store.tracer(lines.append):
        now[0] += timedelta(hours=1)
        store.retract(pro.record_id, by=lead, reason="entered on the wrong account")
        store.retract(present(team).record_id, by=lead, reason="no such account")
        now[0] += timedelta(hours=1)
        assert present(store.get_fact("user:1", "plan", by=ann)).value == "Free"
        assert store.get_fact("user:2", "plan", by=ann) is None
        assert present(store.get_fact("user:3", "plan", by=ann)).value == "Basic"
    picks = sum("a retraction's slots picked again from the org's history" in line for line in lines)
    assert picks == (2 if catch_up == "write" else 1), lines  # each write, or the one read after both
    after = store.read_cache_stats()
    assert (after.history_queries, after.history_advances) == (stats.history_queries, stats.history_advances)
    served = {r.record.subject: r.record.value for r in store.recall("plan", by=ann, k=10)}
    assert served == {"user:1": "Free", "user:3": "Basic"}
    bases = [store._basis(None, None, None), store._basis(before, None, None), store._basis(None, now[0], T0)]
    _compare(store, random.Random(2), _readers(), bases, reads=12)


def test_a_retraction_of_a_version_another_write_replaced_since_leaves_the_new_head(tmp_path):
    """The cell is advanced by a new version and the retraction of the one it replaced in one
    go: the new version heads; picked again from the versions, the retracted one does not."""
    store, now, lead, ann, pro, _ = _pro_over_free(tmp_path / "s", catch_up="read")
    scope = ml.Scope("acme", "support")
    store.write(ml.Fact("user:1", "plan", "Team", T0 + timedelta(hours=3), source="crm", scope=scope), by=lead)
    store.retract(pro.record_id, by=lead, reason="entered on the wrong account")
    now[0] += timedelta(hours=1)
    lines: list[str] = []
    with store.tracer(lines.append):
        assert present(store.get_fact("user:1", "plan", by=ann)).value == "Team"
    assert any("a retraction's slots picked again" in line for line in lines), lines
    _compare(store, random.Random(3), _readers(), [store._basis(None, None, None)], reads=8)


def _set(row, **values):
    """A one-row table with *values* put in its columns (a row written by hand)."""
    for name, value in values.items():
        at = row.schema.get_field_index(name)
        row = row.set_column(at, row.schema.field(at), pa.array([value], row.schema.field(at).type))
    return row


@pytest.mark.parametrize("reopened", [False, True], ids=["cells held", "reopened"])
def test_a_retraction_row_written_in_another_org_retracts_nothing(tmp_path, reopened):
    """A retraction acts within its own org (`query.retractions_sql`): `retract` writes it at
    its target's scope, and a row written by hand in another org leaves the target served,
    by the per-reader query and by the heads alike, whether the org's cells and history
    were held before it was appended or are read afresh after (`Visibility._history_rows`,
    which reads the org's rows only). One in the target's org, appended the same way,
    retracts it."""
    path = tmp_path / "s"
    store, now, lead, ann, pro, before = _pro_over_free(path)

    def retraction_in(org, record_id):
        row = _set(stored_row(store, "fact", pro.record_id), status="retracted", supersedes=pro.record_id, org=org)
        append_raw(store, row, record_id=record_id, own_txn=True)

    def check(store, served_now):
        bases = [store._basis(None, None, None), store._basis(before, None, None)]
        assert present(store.get_fact("user:1", "plan", by=ann)).value == served_now
        assert present(store.get_fact("user:1", "plan", by=ann, as_of=before)).value == "Pro"
        for reader in (ann, lead):
            for basis in bases:
                assert _fast(store, "fact", reader, basis) == _slow(store, "fact", reader, basis)

    retraction_in("globex", "retraction-from-globex")
    now[0] += timedelta(hours=1)
    if reopened:
        store.close()
        store = ml.open(path, clock=lambda: now[0], embedder=ml.HashingEmbedder())
    check(store, "Pro")
    retraction_in("acme", "retraction-in-acme")
    now[0] += timedelta(hours=1)
    check(store, "Free")


def test_a_row_stored_under_the_old_id_of_a_slot_whose_parts_hold_the_separator_is_still_read(tmp_path):
    """Before parts holding the separator had slots of their own, such a row's lineage id was
    the hash of the parts joined (`records._slot`). A read of that subject and attribute
    goes through the subject index (`query._read_slot` gives no slot), so such a stored row
    is served as the per-reader query serves it."""
    import hashlib

    from memory_lakehouse.records import SLOT_SEPARATOR

    now = [T0 + timedelta(days=1)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    subject = f"a{SLOT_SEPARATOR}b"
    new = store.write(ml.Fact(subject, "c", "one", T0, source="crm"), by=lead)
    old_id = hashlib.sha256(SLOT_SEPARATOR.join(["fact", subject, "c"]).encode()).hexdigest()[:32]
    row = _set(stored_row(store, "fact", new.record_id), lineage_id=old_id)
    append_raw(store, row, record_id="stored-under-the-old-id", own_txn=True)
    now[0] += timedelta(hours=1)
    basis = store._basis(None, None, None)
    filters = {"attribute": "c"}
    assert len(_slow(store, "fact", lead, basis, subject, filters)) == 2  # two slots, one head each
    assert _fast(store, "fact", lead, basis, subject, filters) == _slow(store, "fact", lead, basis, subject, filters)


@pytest.mark.parametrize("limit", [query.ADVANCE_ROWS, 3], ids=["few rows", "more rows than the limit"])
def test_an_orgs_first_rows_of_a_kind_written_while_serving_make_its_history_without_a_query(
    tmp_path, monkeypatch, limit
):
    """An org's history of a kind whose rows all came in a few small appends (its first
    preferences, written while the process serves) is the empty history advanced by them
    (`Visibility._few_rows`): reads now and as of earlier bases, by readers at every depth,
    through a mixed-org batch, a supersession, a retraction and a forget, get what the
    per-reader query returns, and no history is queried. Past `HISTORY_FROM_ROWS` rows the
    history's query runs, with the same answers."""
    monkeypatch.setattr(query, "HISTORY_FROM_ROWS", limit)
    now = [T0 + timedelta(days=1)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    leads = {org: ml.Principal(f"lead-{org}", ml.Scope(org), role="steward") for org in ORGS}
    readers = _readers()
    for org in ORGS:
        store.write(ml.Fact("user:1", "plan", "Free", T0, source="crm", scope=ml.Scope(org, "support")), by=leads[org])
    bases = [store._basis(None, None, None)]
    for who in readers:
        store.recall("plan", by=who)  # the orgs served: their fact heads built, no preference yet
    now[0] += timedelta(hours=1)
    with store.batch() as b:  # one chunk holding both orgs' first preferences
        for org in ORGS:
            for i, scope in enumerate(_scopes(org)[:4]):
                b.write(
                    ml.Preference(f"user:{i % 3}", "tone", f"brief {i}", T0, source="chat", scope=scope), by=leads[org]
                )
    now[0] += timedelta(hours=1)
    bases.append(store._basis(None, None, None))
    later = store.write(
        ml.Preference("user:0", "tone", "long", T0 + timedelta(hours=5), source="chat", scope=ml.Scope("acme")),
        by=leads["acme"],
    )
    now[0] += timedelta(hours=1)
    bases.append(store._basis(None, None, None))
    store.retract(later.record_id, by=leads["acme"], reason="misheard")
    now[0] += timedelta(hours=1)
    store.forget("user:1", by=leads["globex"], reason="erasure request")
    now[0] += timedelta(hours=1)
    bases += [store._basis(None, None, None), store._basis(None, T0 + timedelta(hours=2), T0 + timedelta(hours=6))]
    for who in readers:
        for basis in bases:
            for subject in (None, "user:0", "user:2"):
                assert _fast(store, "preference", who, basis, subject) == _slow(
                    store, "preference", who, basis, subject
                )
    stats = store.read_cache_stats()
    if limit == query.ADVANCE_ROWS:
        assert stats.history_queries == 0 and stats.history_advances >= 2, stats
    else:
        assert stats.history_queries >= 2, stats
    acme = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    assert present(store.get_fact("user:0", "tone", by=acme, kind="preference")).value != "long"


def test_a_retraction_row_of_another_slot_still_retracts_its_target_in_the_orgs_history(tmp_path):
    """`retract` writes a retraction in its target's slot, and the history's advance looks
    for targets there first (`Visibility._retracted_by`); a retraction row written by hand
    in another slot of the same org retracts its target all the same (`retractions_sql`
    joins on the id and the org only), in the history advanced past it as in the query."""
    store, now, lead, ann, pro, before = _pro_over_free(tmp_path / "s", also=("user:2", "Team"))
    other = present(store.get_fact("user:2", "plan", by=ann))
    row = _set(
        stored_row(store, "fact", other.record_id), status="retracted", supersedes=pro.record_id
    )  # user:2's slot
    append_raw(store, row, record_id="retraction-in-another-slot", own_txn=True)
    now[0] += timedelta(hours=1)
    lines: list[str] = []
    with store.tracer(lines.append):
        assert present(store.get_fact("user:1", "plan", by=ann)).value == "Free"
        assert present(store.get_fact("user:2", "plan", by=ann)).value == "Team"
        assert present(store.get_fact("user:1", "plan", by=ann, as_of=before)).value == "Pro"
    assert any("(a retraction among them)" in line for line in lines), lines
    assert store.read_cache_stats().history_queries == 1, lines
    for reader in (ann, lead):
        for basis in (store._basis(None, None, None), store._basis(before, None, None)):
            for subject in (None, "user:1"):
                assert _fast(store, "fact", reader, basis, subject) == _slow(store, "fact", reader, basis, subject)


@pytest.mark.parametrize("retracted", [False, True], ids=["advanced cell", "cell picked from the history"])
def test_a_read_of_one_slot_is_served_what_the_query_serves_however_its_parts_are_spelled(tmp_path, retracted):
    """`get_fact` finds its slot's heads by the slot's lineage id (`query._read_slot`), not by
    the subject index, on a cell advanced by a write and on one picked from the org's
    history (after a retraction): the same rows as the per-reader query, whatever case and
    spaces the subject and attribute were written with. An attribute spelled otherwise
    than the read's is left to the query (`OrgHeads._filtered`). Parts holding the separator
    a slot's parts are joined by are slots of their own (`records._slot`), read through the
    subject index (rows stored before carry another id)."""
    now = [T0 + timedelta(days=1)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    ann = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
    scope = ml.Scope("acme", "support")
    written = [
        ("User:1", "plan", "Free"),
        (" user:1 ", "plan", "Pro"),
        ("user:2", "Plan", "Team"),
        ("user:3", "seats", "5"),
        ("user:3", "plan", "Free"),
        ("a\x1fb", "c", "one"),
        ("a", "b\x1fc", "two"),
    ]
    for i, (subject, attribute, value) in enumerate(written):
        store.write(ml.Fact(subject, attribute, value, T0 + timedelta(hours=i), source="crm", scope=scope), by=lead)
    now[0] += timedelta(hours=1)
    store.get_fact("user:9", "plan", by=ann)  # the org's cell, built before the writes below
    gone = store.write(ml.Fact("user:4", "plan", "Pro", T0, source="crm", scope=scope), by=lead)
    if retracted:
        now[0] += timedelta(hours=1)
        store.retract(gone.record_id, by=lead, reason="wrong account")
    now[0] += timedelta(hours=1)
    reads = [("user:1", "plan"), ("USER:1", "plan"), ("user:2", "plan"), ("user:3", "seats"), ("user:3", "plan")]
    reads += [("user:4", "plan"), ("a\x1fb", "c"), ("a", "b\x1fc"), ("user:9", "plan")]
    basis = store._basis(None, None, None)
    for reader in (ann, lead):
        for subject, attribute in reads:
            filters = {"attribute": attribute}
            assert _fast(store, "fact", reader, basis, subject, filters) == _slow(
                store, "fact", reader, basis, subject, filters
            ), (subject, attribute)
    assert present(store.get_fact("USER:1", "plan", by=ann)).value == "Pro"
    assert (store.get_fact("user:4", "plan", by=ann) is None) is retracted
    assert present(store.get_fact("a\x1fb", "c", by=ann)).value == "one"
    assert present(store.get_fact("a", "b\x1fc", by=ann)).value == "two"
    cells = store.vis._heads[("fact", "acme")]
    assert any(c.heads._by_subject is not None for c in cells)  # built by the reads of parts holding the separator
    for cell in cells:
        cell.heads._by_subject = None
    carl = ml.Principal("carl", ml.Scope("acme", "support", "t1", "carl"), role="member")  # a scope not read yet
    assert present(store.get_fact("USER:1", "plan", by=carl)).value == "Pro"
    assert all(c.heads._by_subject is None for c in store.vis._heads[("fact", "acme")])  # one slot: no index


def test_advanced_heads_keep_hiding_an_appended_row_the_ledger_forgets(tmp_path):
    """A row of a forgotten subject at its old generation, appended after the forget by a
    writer that skipped the write path's checks (an old backfill job, another engine):
    the ledger hides it, and heads and a history advanced by it do too."""
    now = [T0 + timedelta(days=1)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    gone = store.write(ml.Fact("user:1", "plan", "Pro", T0, source="crm"), by=lead)
    stale = stored_row(store, "fact", gone.record_id)
    store.write(ml.Fact("user:2", "plan", "Team", T0, source="crm"), by=lead)
    # begun between the past valid time read below and now: a cell at now cannot serve that read
    store.write(ml.Fact("user:3", "plan", "Free", T0 + timedelta(hours=18), source="crm"), by=lead)
    store.forget("user:1", by=lead, reason="erasure request")
    now[0] += timedelta(hours=1)
    assert store.get_fact("user:1", "plan", by=lead) is None  # heads built with the ledger as it is now
    assert present(store.get_fact("user:2", "plan", by=lead)).value == "Team"
    then = T0 + timedelta(hours=12)  # before anything was known: no cell at now covers it, the org's history does
    assert store.get_fact("user:2", "plan", by=lead, as_of=then) is None

    now[0] += timedelta(hours=1)
    append_raw(store, stale, record_id="rerun-1")
    lines: list[str] = []
    with store.tracer(lines.append):
        assert store.get_fact("user:1", "plan", by=lead) is None
        # neither cell can serve it (one at *then* cannot be advanced: older rows became known since)
        assert store.get_fact("user:1", "plan", by=lead, known_at=now[0], valid_at=then) is None
        assert present(store.get_fact("user:2", "plan", by=lead, known_at=now[0], valid_at=then)).value == "Team"
    assert any("advanced by the rows written since" in line for line in lines)
    assert any("history, advanced by the rows written since" in line for line in lines)
    assert store.read_cache_stats().history_advances == 1


@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=8),
    picks=st.lists(st.integers(0, 10_000), max_size=30),
)
@settings(max_examples=200, deadline=None)
def test_taking_rows_batch_by_batch_returns_what_table_take_returns(sizes, picks):
    """`lake.take_rows` (how reads take rows from a snapshot of many appended chunks) is
    ``Table.take``: the same rows, in the order asked, repeats and all."""
    chunks, start = [], 0
    for n in sizes:
        chunks.append(
            pa.table(
                {
                    "i": pa.array(range(start, start + n), pa.int64()),
                    "s": pa.array([f"r{j}" for j in range(start, start + n)], pa.string()),
                }
            )
        )
        start += n
    table = pa.concat_tables(chunks)
    positions = np.array([p % table.num_rows for p in picks] if table.num_rows else [], dtype=np.int64)
    assert take_rows(table, positions).equals(table.take(pa.array(positions, pa.int64())).combine_chunks())
    assert take_rows(table, pa.chunked_array([pa.array(positions, pa.int64())])).num_rows == len(positions)


def test_a_forget_rebuilds_the_heads_of_the_orgs_it_can_hide_rows_of_and_keeps_the_others(tmp_path):
    """Remembered reads of an org depend on the last ledger change that could hide one of its
    rows (`Visibility.set_forgotten`): a forget of a subject of one org rebuilds that org's
    heads and leaves another org's in place, and both still answer as the query does."""
    now = [T0 + timedelta(days=1)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    leads = {org: ml.Principal(f"lead-{org}", ml.Scope(org), role="steward") for org in ORGS}
    store.write(ml.Fact("user:1", "plan", "Pro", T0, source="crm"), by=leads["acme"])
    store.write(ml.Fact("user:2", "plan", "Team", T0, source="crm"), by=leads["acme"])
    store.write(ml.Fact("user:3", "plan", "Free", T0, source="crm"), by=leads["globex"])
    for org, subject in (("acme", "user:1"), ("globex", "user:3")):  # both orgs' heads built
        assert store.get_fact(subject, "plan", by=leads[org]) is not None
    now[0] += timedelta(hours=1)
    store.forget("user:1", by=leads["acme"], reason="erasure request")
    acme: list[str] = []
    with store.tracer(acme.append):
        assert store.get_fact("user:1", "plan", by=leads["acme"]) is None
        assert present(store.get_fact("user:2", "plan", by=leads["acme"])).value == "Team"
    globex: list[str] = []
    with store.tracer(globex.append):
        assert present(store.get_fact("user:3", "plan", by=leads["globex"])).value == "Free"
    assert any("read by one query" in line for line in acme)  # rebuilt under the new ledger
    assert any("from cache" in line for line in globex) and not any("one query" in line for line in globex)
    _compare(store, random.Random(1), _readers(), [store._basis(None, None, None)], reads=4)


def test_a_new_ledger_state_at_a_freed_states_address_does_not_reuse_its_heads(tmp_path):
    """Remembered heads record which ledger state they were built under. CPython reuses the
    address (the ``id``) of a freed object, so a ledger state recorded by ``id`` could pass
    for a newer one built at the same address, and serve rows the newer ledger hides."""
    from memory_lakehouse.query import Forgotten

    store = ml.open(tmp_path / "s", clock=lambda: T0 + timedelta(days=1), embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("globex"), role="curator")
    hidden = store.write(ml.Fact("user:1", "plan", "Pro", T0, source="crm"), by=lead).record_id
    vis = store.vis
    reused = False
    for attempt in range(200):
        first = Forgotten(record_ids=frozenset({f"unrelated-{attempt}"}))
        vis.set_forgotten(first)
        assert present(store.get_fact("user:1", "plan", by=lead)).record_id == hidden  # heads under *first*
        address = id(first)
        vis.set_forgotten(Forgotten())
        vis._hidden_for.clear()  # drop every other reference to *first*: the mirror's, the registration's
        vis._forgotten_registered = None
        del first
        newer = Forgotten(record_ids=frozenset({hidden}))
        reused = id(newer) == address
        vis.set_forgotten(newer)
        assert vis.rows("fact", lead, store._basis(None, None, None)).num_rows == 0, attempt
        if reused:
            break
    assert reused, "CPython did not reuse an address in 200 tries: the test proved nothing"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from(["p1", "P1", "pro", "PRO", "Straße", "STRASSE", "ǅ", "ǆ", "x"]))),
    st.sampled_from(["p1", "P1", "pro", "straße", "strasse", "ǆ", "y"]),
)
def test_a_filter_over_a_few_heads_answers_as_the_vectorised_filter(values, value):
    """`OrgHeads._filtered` compares a few heads in Python, many in Arrow kernels: the same
    heads, and the same refusal when a head is spelled otherwise but folds to the value."""
    from memory_lakehouse.heads import _filtered_arrow, _filtered_small

    idx = np.arange(10, 10 + len(values), dtype=np.int64)
    small = _filtered_small(idx, values, value)
    vectorised = _filtered_arrow(idx, pa.array(values, pa.string()), value)
    assert (small is None) == (vectorised is None)
    if small is not None and vectorised is not None:
        assert small.tolist() == vectorised.tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4)), max_size=30),
    st.lists(st.tuples(st.integers(0, 8), st.integers(1, 4)), min_size=1, max_size=5),
)
def test_appended_heads_take_the_places_the_stable_sort_gives_them(old, appended):
    """`OrgHeads.advanced` inserts a write's new heads among the sorted ones instead of sorting
    every head again: the same permutation as ``np.lexsort((depth, lineage))``."""
    from memory_lakehouse.heads import _with_inserted

    old = sorted(old)
    lineage = np.array([lin for lin, _ in old + appended], dtype=np.int32)
    depth = np.array([d for _, d in old + appended], dtype=np.int8)
    assert _with_inserted(lineage, depth, len(old)).tolist() == np.lexsort((depth, lineage)).tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 3),
    st.lists(st.integers(-(2**62), 2**62), max_size=60),
    st.lists(st.tuples(st.integers(0, 60), st.integers(-(2**62), 2**62)), max_size=6),
    st.data(),
)
def test_rows_gathered_and_inserted_through_their_void_view_equal_numpys_fancy_index_and_insert(
    width, flat, inserts, data
):
    """The heads' (n, 3) keys are gathered by a take (`_rows_at`) and inserted into as one
    void value a row (`_insert_rows`), not by numpy's slower 2-D paths: the same arrays
    as ``values[idx]`` and ``np.insert(values, at, rows, axis=0)``, 1-D (width 0) and 2-D,
    places repeated or at either end."""
    from memory_lakehouse.heads import _insert_rows, _rows_at

    shape = (-1,) if width == 0 else (-1, width)
    n = len(flat) // max(width, 1)
    values = np.array(flat[: n * max(width, 1)], dtype=np.int64).reshape(shape)
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=20)) if n else [], dtype=np.int64)
    assert _rows_at(values, idx).tolist() == values[idx].tolist()
    at = np.array(sorted(min(place, n) for place, _ in inserts), dtype=np.int64)
    rows = np.array([[v + j for j in range(max(width, 1))] for _, v in inserts], dtype=np.int64)
    rows = rows.reshape(len(inserts)) if width == 0 else rows.reshape(len(inserts), width)
    inserted = _insert_rows(values, at, rows)
    assert inserted.shape == np.insert(values, at, rows, axis=0).shape
    assert inserted.tolist() == np.insert(values, at, rows, axis=0).tolist()


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.integers(-1, 2), st.integers(0, 3)), max_size=40),
    st.lists(st.tuples(st.integers(0, 7), st.integers(1, 4), st.integers(-1, 2), st.integers(0, 3)), max_size=40),
)
@settings(max_examples=300, deadline=None)
def test_versions_appended_to_a_sorted_history_take_the_places_the_sort_gives_them(old, appended):
    """`OrgHistory.advanced` places a few appended versions among the sorted ones
    (`_version_order`) instead of sorting every version again by its nine keys: the same
    permutation as ``np.lexsort``, ties on every key but the unique position included,
    and past `INSERTED_VERSIONS` appended the sort itself."""
    from memory_lakehouse.heads import _version_order

    rows = list(range(len(old) + len(appended)))
    random.Random(len(rows)).shuffle(rows)
    versions = [(*v, r) for v, r in zip(old + appended, rows, strict=True)]
    versions[: len(old)] = sorted(versions[: len(old)])
    keys = [np.array(column, dtype=np.int64) for column in zip(*versions, strict=True)] if versions else []
    if not keys:
        return
    keys[0] = keys[0].astype(np.int32)  # the lineage codes' and the depths' own types
    keys[1] = keys[1].astype(np.int8)
    assert _version_order(keys, len(old)).tolist() == np.lexsort(keys[::-1]).tolist()


@pytest.mark.parametrize("catch_up", ["write", "read"])
def test_a_backdated_version_written_after_the_current_one_does_not_take_its_head(tmp_path, catch_up):
    """The head of a (slot, scope) is its latest valid_from, not its latest write: heads
    advanced by a backdated version (written later, valid from earlier) keep the current one,
    whether the write advances them or the read after it."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), catch_up=catch_up)
    org = ORGS[0]
    lead = ml.Principal(f"lead-{org}", ml.Scope(org), role="steward")
    reader = ml.Principal("reader", ml.Scope(org), role="member")
    current = store.write(ml.Fact("acct:1", "plan", "Team", T0 + timedelta(days=5), source="crm"), by=lead)
    assert present(store.get_fact("acct:1", "plan", by=reader)).value == "Team"  # builds the org's heads
    lines: list[str] = []
    now[0] += timedelta(minutes=5)
    with store.tracer(lines.append):
        store.write(ml.Fact("acct:1", "plan", "Free", T0 + timedelta(days=2), source="crm"), by=lead)
        basis = store._basis(None, None, None)
        fast = _fast(store, "fact", reader, basis)
    assert any("advanced by the rows written since" in line for line in lines)
    assert fast == _slow(store, "fact", reader, basis) == [current.record_id]


@pytest.mark.parametrize("slot", [("acct:2", "tier"), ("acct:1", "plan")], ids=["new-slot", "held-slot"])
@pytest.mark.parametrize("days", [(2, 5), (5, 2)], ids=["newer-written-second", "newer-written-first"])
def test_two_versions_of_a_slot_written_between_reads_advance_to_the_later_one(tmp_path, days, slot):
    """Both versions of a slot arrive in one advance (the read's: ``catch_up="read"``), both
    later than the head the cell holds, if any: the one valid from later is its head,
    whichever was written first (the second is weighed against the first, not the old head)."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), catch_up="read")
    org = ORGS[0]
    lead = ml.Principal(f"lead-{org}", ml.Scope(org), role="steward")
    reader = ml.Principal("reader", ml.Scope(org), role="member")
    store.write(ml.Fact("acct:1", "plan", "Team", T0, source="crm"), by=lead)
    assert present(store.get_fact("acct:1", "plan", by=reader)).value == "Team"  # builds the org's heads
    now[0] += timedelta(minutes=5)
    subject, attribute = slot
    first, second = (
        store.write(ml.Fact(subject, attribute, f"from day {d}", T0 + timedelta(days=d), source="crm"), by=lead)
        for d in days
    )
    later = first if days[0] > days[1] else second
    basis = store._basis(None, None, None)
    lines: list[str] = []
    with store.tracer(lines.append):
        fast = _fast(store, "fact", reader, basis, subject=subject)
    assert any("advanced by the rows written since" in line for line in lines)
    assert fast == _slow(store, "fact", reader, basis, subject=subject) == [later.record_id]


def test_new_slots_written_between_reads_are_each_served_by_subject_and_in_snapshot_order(tmp_path):
    """Several new (slot, scope)s in one advance (the read's), with the cell's subject index and
    snapshot order built before: each subject's read is served its own head, and every
    reader the query's rows, as the heads' places shift by those inserted before them."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), catch_up="read")
    org = ORGS[0]
    lead = ml.Principal(f"lead-{org}", ml.Scope(org), role="steward")
    readers = [ml.Principal("reader", ml.Scope(org), role="member"), ml.Principal("t", ml.Scope(org, "d", "t"))]
    for i in range(4):
        store.write(ml.Fact(f"acct:{i}", "plan", f"v{i}", T0, source="crm"), by=lead)
    basis = store._basis(None, None, None)
    for i in range(4):  # builds the org's heads, their subject index and their snapshot order
        assert _fast(store, "fact", readers[0], basis, subject=f"acct:{i}") == _slow(
            store, "fact", readers[0], basis, subject=f"acct:{i}"
        )
    _positions_agree(store, readers[0], basis)
    now[0] += timedelta(minutes=5)
    scopes = [ml.Scope(org), ml.Scope(org, "d", "t"), ml.Scope(org)]
    written = [
        store.write(ml.Fact(f"acct:{i}", attribute, "new", T0, source="crm", scope=scope), by=lead)
        for i, attribute, scope in [(9, "plan", scopes[0]), (1, "plan", scopes[1]), (5, "tier", scopes[2])]
    ]
    basis = store._basis(None, None, None)
    lines: list[str] = []
    with store.tracer(lines.append):
        for subject in ["acct:9", "acct:1", "acct:5", "acct:0", "acct:3"]:
            for reader in readers:
                fast = _fast(store, "fact", reader, basis, subject=subject)
                assert fast == _slow(store, "fact", reader, basis, subject=subject), (subject, reader.scope)
        for reader in readers:
            assert _fast(store, "fact", reader, basis) == _slow(store, "fact", reader, basis)
            _positions_agree(store, reader, basis)
    assert any("advanced by the rows written since" in line for line in lines)
    assert {r.record_id for r in written} <= {rid for rid in _fast(store, "fact", readers[1], basis)}


def _positions_agree(store, reader, basis):
    """Recall's read from the heads (their snapshot order) is the per-reader query's."""
    at = store.vis.positions("fact", reader, basis)
    store.vis.use_heads = False
    try:
        assert store.vis.positions("fact", reader, basis).tolist() == at.tolist(), reader.scope
    finally:
        store.vis.use_heads = True


_instant = st.one_of(st.none(), st.integers(0, 40).map(lambda d: T0 + timedelta(days=d)))


@given(
    chunks=st.lists(
        st.lists(
            st.tuples(st.sampled_from(["acme", "globex", "initech"]), _instant, _instant, _instant, _instant),
            max_size=6,
        ),
        min_size=1,
        max_size=12,
    ),
    cuts=st.lists(st.integers(1, 12), max_size=4),
    lazy_rows=st.integers(0, 7),
)
@settings(max_examples=200, deadline=None)
def test_chunks_taken_in_together_give_the_boundaries_they_give_one_by_one(chunks, cuts, lazy_rows):
    """`query._Boundaries`: per org, the appends that brought it rows, which chunks they are
    (and where each begins), and the sorted instants of each clock, whatever the batches the
    chunks are taken in, whether an add's instants were taken at once or when asked for
    (`query.LAZY_INSTANTS_ROWS`), and whether they were asked for between adds."""
    ts = pa.timestamp("us", tz="UTC")
    tables = [
        pa.table(
            {
                name: pa.array([row[i] for row in rows], pa.string() if i == 0 else ts)
                for i, name in enumerate(query._BOUNDARY_COLUMNS)
            }
        )
        for rows in chunks
    ]
    lazy_from = query.LAZY_INSTANTS_ROWS
    try:
        # every add's instants left until asked for; one of a few rows or more; none
        query.LAZY_INSTANTS_ROWS = 0
        one_by_one = query._Boundaries(0)
        for table in tables:
            one_by_one.add([table])
        assert set(one_by_one._waiting) == set(one_by_one.appends)  # nothing taken before it is asked for
        query.LAZY_INSTANTS_ROWS = lazy_rows
        asking = query._Boundaries(0)
        for table in tables:
            asking.add([table])
            for org in asking.appends:
                asking.instants(org)
        query.LAZY_INSTANTS_ROWS = 10**9
        together = query._Boundaries(0)
        at = 0
        for cut in [*sorted(set(cuts)), len(tables)]:
            if at < cut <= len(tables):
                together.add(tables[at:cut])
                at = cut
    finally:
        query.LAZY_INSTANTS_ROWS = lazy_from
    assert (together.applied, together.rows) == (len(tables), sum(len(rows) for rows in chunks))
    assert together.appends == one_by_one.appends and together.chunks == one_by_one.chunks
    for org in one_by_one.appends:
        assert [a.tolist() for a in together.instants(org)] == [a.tolist() for a in one_by_one.instants(org)]
        assert [a.tolist() for a in asking.instants(org)] == [a.tolist() for a in one_by_one.instants(org)]
    for org in {row[0] for rows in chunks for row in rows}:  # against the definition, written out
        mine = [i for i, rows in enumerate(chunks) if any(row[0] == org for row in rows)]
        assert one_by_one.appends[org] == len(mine)
        assert [c for c, _ in one_by_one.chunks[org]] == mine
        assert [f for _, f in one_by_one.chunks[org]] == [sum(len(r) for r in chunks[:i]) for i in mine]
        instants = [
            (c, query._micros(row[c]))
            for rows in chunks
            for row in rows
            if row[0] == org
            for c in (1, 2, 3, 4)
            if row[c] is not None
        ]
        known, valid = sorted({m for c, m in instants if c == 1}), sorted({m for c, m in instants if c > 1})
        assert [a.tolist() for a in one_by_one.instants(org)] == [known, valid]


def _row_instants(store, kinds=("fact", "preference", "note")):
    """(scope, clock, instant) for every instant at which a row's visibility can flip: a
    microsecond before, on and after each, on the clock it flips on."""
    out: set[tuple[ml.Scope, str, datetime]] = set()
    for kind in kinds:
        rows = store.lake.all_rows(kind).to_pylist()
        for row in rows:
            scope = ml.Scope(row["org"], row["division"], row["team"], row["actor"])
            for clock, names in (("known", ("known_since",)), ("valid", ("valid_from", "valid_to", "expires_at"))):
                for name in names:
                    if row[name] is not None:
                        out.update((scope, clock, row[name] + timedelta(microseconds=d)) for d in (-1, 0, 1))
    return sorted(out, key=lambda e: (e[1], e[2], str(e[0])))


def _history_of_writes(tmp_path, rng, *, writes, retract_every, forget_at):
    """A store after *writes* random writes an hour or more apart, a retraction every
    *retract_every* and a forget at *forget_at*; its clock is then a day past the last."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    writers = {org: ml.Principal(f"lead-{org}", ml.Scope(org), role="steward") for org in ORGS}
    written = []
    for step in range(writes):
        now[0] += timedelta(hours=rng.randrange(1, 30))
        result = _random_write(store, rng, now, writers)
        if result is not None and result.action != "duplicate":
            written.append((result, result.scope.org))
        if step % retract_every == retract_every - 1 and written:
            target, org = rng.choice(written)
            try:
                store.retract(target.record_id, by=writers[org], reason="wrong")
            except ml.LakehouseError:
                pass
        if step == forget_at:
            store.forget(rng.choice(SUBJECTS), by=writers[rng.choice(ORGS)], reason="erasure request")
    now[0] += timedelta(days=1)
    return store, now


def test_a_mirror_copied_in_slices_answers_as_one_copied_at_once_and_as_each_orgs_rows(tmp_path, monkeypatch):
    """The per-reader query over the mirror of every org (many bases at once: a replay) and
    over the reader's org's rows (`Visibility._org_relation`: one read) give the same rows,
    whether the mirror was copied in one statement or in slices of a few rows
    (`query.MIRROR_COPY_ROWS`, retractions and a forget among them)."""
    store, now = _history_of_writes(tmp_path, random.Random(11), writes=60, retract_every=5, forget_at=25)
    readers = _readers()
    bases = [store._basis(None, None, None), store._basis(now[0] - timedelta(days=3), None, None)]
    reads = [(f"d{i}", reader, basis, None) for i, (reader, basis) in enumerate((r, b) for r in readers for b in bases)]
    store.close()

    def replayed(copy_rows):
        monkeypatch.setattr(query, "MIRROR_COPY_ROWS", copy_rows)
        opened = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
        try:
            rows = opened.vis.visible("fact", bases_table(reads))
            assert opened.vis._mirrored["fact"][2] == opened.lake.all_rows("fact").num_rows  # every row copied
            got = sorted(zip(rows.column("decision_id").to_pylist(), rows.column("record_id").to_pylist(), strict=True))
            alone = sorted((d, rid) for d, p, b, _ in reads for rid in _slow(opened, "fact", p, b))
            return got, alone
        finally:
            opened.close()

    at_once, alone = replayed(10**9)
    assert at_once == alone and len(at_once) > 20
    assert replayed(7) == (at_once, alone)


@pytest.mark.parametrize("seed", [6, 7])
def test_reads_as_of_every_rows_own_instants_answer_as_the_per_reader_query(tmp_path, seed):
    """Heads picked from the org's history (`heads.OrgHistory`) at bases on the rows' own
    instants and a microsecond either side, read by a reader at the row's scope: each rule's
    ``<=`` or ``<`` decides there (known by then, retracted by then, begun by then, ended or
    expired by then). The other clock is now: everything known, or everything begun."""
    rng = random.Random(seed)
    store, now = _history_of_writes(tmp_path, rng, writes=40, retract_every=6, forget_at=30)
    lines: list[str] = []
    with store.tracer(lines.append):
        for scope, clock, instant in _row_instants(store):
            who = ml.Principal("reader", scope, role="member")
            basis = store._basis(None, instant, now[0]) if clock == "known" else store._basis(None, now[0], instant)
            _compare_read(store, rng, who, basis)
    assert sum("picked from the org's history" in line for line in lines) >= 50


def test_reads_as_of_many_past_bases_run_one_query_for_the_org(tmp_path):
    """A plan changed at five instants, read as of each of them and between: every answer is
    the version in force then, and the org's versions are read once."""
    now = [T0]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    plans = ["Free", "Pro", "Team", "Pro", "Enterprise"]
    for day, plan in enumerate(plans):
        now[0] = T0 + timedelta(days=day, hours=1)
        store.write(ml.Fact("user:1", "plan", plan, T0 + timedelta(days=day), source="crm"), by=lead)
    reader = ml.Principal("agent", ml.Scope("acme", "support", "t1", "ann"), role="member")
    queries: list[str] = []
    with store.tracer(lambda line: queries.append(line) if "SELECT" in line else None):
        for day, plan in enumerate(plans):
            for hours in (1, 5):  # known the hour after it began, and later that day
                when = T0 + timedelta(days=day, hours=hours)
                assert present(store.get_fact("user:1", "plan", by=reader, as_of=when)).value == plan
        assert store.get_fact("user:1", "plan", by=reader, as_of=T0 + timedelta(minutes=30)) is None  # not known yet
    assert len(queries) == 1, queries


def _orgs_with_five_days_of_plans(tmp_path, orgs=6, **options):
    """*orgs* orgs whose 20 users' plans changed each day for five days; read a day later."""
    now = [T0]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), **options)
    leads = {f"org{i}": ml.Principal(f"lead-org{i}", ml.Scope(f"org{i}"), role="curator") for i in range(orgs)}
    for day in range(5):
        now[0] = T0 + timedelta(days=day, hours=1)
        for lead in leads.values():
            plans = [f"plan {day}-{u}" for u in range(20)]
            store.write_many(
                [ml.Fact(f"user:{u}", "plan", p, T0 + timedelta(days=day), source="crm") for u, p in enumerate(plans)],
                by=lead,
            )
    now[0] = T0 + timedelta(days=6)
    readers = {org: ml.Principal(f"agent-{org}", ml.Scope(org, "support", "t1", "ann"), role="member") for org in leads}
    return store, now, leads, readers


@pytest.mark.parametrize("room", ["few past cells", "every org's cells"])
def test_reads_at_past_bases_and_the_kept_histories_leave_every_orgs_cell_at_now(tmp_path, room):
    """Readers go round the orgs' past bases, more than an org keeps cells for and (with little
    room) more than the heads' bytes hold, and every org's history is kept. The cells at now
    stay (past cells go first, histories have bytes of their own), so the first read after a
    write to each org advances its cell: no query.

    At 1M records, counting the histories with the cells and evicting whole orgs made every
    `get_fact` after a write read its org again (6.8 -> 113 ms)."""
    store, now, leads, readers = _orgs_with_five_days_of_plans(tmp_path)
    for org in readers:
        assert present(store.get_fact("user:1", "plan", by=readers[org])).value == "plan 4-1"
    at_now = sum(c.heads.nbytes for cells in store.vis._heads.values() for c in cells)
    if room == "few past cells":
        store.vis.budget = dataclasses.replace(store.vis.budget, heads=at_now * 3 // 2)
    queries: list[str] = []
    with store.tracer(lambda line: queries.append(line) if "SELECT" in line else None):
        for day in range(4):  # four past bases an org: with the cell at now, more than `HEAD_CELLS`
            for org in readers:
                when = T0 + timedelta(days=day, hours=5)
                assert present(store.get_fact("user:1", "plan", by=readers[org], as_of=when)).value == f"plan {day}-1"
        assert not queries, "each org's history serves its past bases"
    for org in readers:
        store.write(ml.Fact("user:2", "plan", f"Enterprise {org}", now[0], source="crm"), by=leads[org])
        lines: list[str] = []
        with store.tracer(lines.append):
            assert present(store.get_fact("user:2", "plan", by=readers[org])).value == f"Enterprise {org}"
        assert not [line for line in lines if "SELECT" in line], f"{org}'s cell at now was evicted"


def test_readers_going_round_more_orgs_than_the_histories_hold_keep_the_held_ones(tmp_path):
    """With room for two orgs' histories, reads go round six orgs' past bases. Every read
    answers as of its basis, and the histories held stay within their bytes. The held ones
    are the first two orgs read: the others, wanted no more often, are read and not kept, so
    a round queries four orgs (LRU alone pushed out the org the round asked next: a query
    every read). The one read last waits beside them (the window), and an org wanted more
    often than a held one takes its place when it leaves the window."""
    store, _, _, readers = _orgs_with_five_days_of_plans(tmp_path)
    assert present(store.get_fact("user:1", "plan", by=readers["org0"], as_of=T0 + timedelta(hours=5))).value
    (_, one), *_ = store.vis._histories.values()
    store.vis.budget = dataclasses.replace(store.vis.budget, histories=one.nbytes * 5 // 2)
    queries: list[str] = []
    with store.tracer(lambda line: queries.append(line) if "SELECT" in line else None):
        for day in range(4):
            queries.clear()
            for reader in readers.values():
                when = T0 + timedelta(days=day, hours=5)
                assert present(store.get_fact("user:1", "plan", by=reader, as_of=when)).value == f"plan {day}-1"
                assert sum(h.nbytes for _, h in store.vis._histories.values()) <= store.vis.budget.histories
            assert set(store.vis._histories) == {("fact", "org0"), ("fact", "org1")}
            if day:  # (on the first day org0's basis was read before the round)
                assert len(queries) == len(readers) - 2, f"day {day}"
    # bases no cell holds (a row's instant lies between each and every cell's; the day's plans
    # begun, not yet known): org5's history, read last in the round, waits beside the held ones
    # and serves the next reads of org5 without a query
    for minutes in (30, 20):
        when = T0 + timedelta(days=4, minutes=minutes)
        queries.clear()
        with store.tracer(lambda line: queries.append(line) if "SELECT" in line else None):
            assert present(store.get_fact("user:1", "plan", by=readers["org5"], as_of=when)).value == "plan 3-1"
        assert not queries
    # another org's history read pushes it out: wanted more often than org0, the least recently
    # picked, it takes org0's place
    assert present(store.get_fact("user:1", "plan", by=readers["org3"], as_of=when)).value == "plan 3-1"
    assert list(store.vis._histories) == [("fact", "org1"), ("fact", "org5")]


def test_a_history_waiting_in_the_window_is_not_served_once_its_org_is_written(tmp_path):
    """With no room, org1's history waits in the window after its read. A write to org1 moves
    its state on: the next read of org1 that needs its history reads it again and sees the write."""
    store, now, leads, readers = _orgs_with_five_days_of_plans(tmp_path, orgs=2, read_cache_bytes=0)
    long_ago = T0 + timedelta(hours=5)
    for org in ("org0", "org1"):  # org0's history is held (the first), org1's waits in the window
        assert present(store.get_fact("user:1", "plan", by=readers[org], as_of=long_ago)).value == "plan 0-1"
    assert store.vis._history_window is not None and store.vis._history_window[0] == ("fact", "org1")
    store.write(ml.Fact("user:1", "plan", "Enterprise", now[0], source="crm"), by=leads["org1"])
    # at now: org1's only cell is days behind (the plans of days 1-4 lie between), so its history
    assert present(store.get_fact("user:1", "plan", by=readers["org1"])).value == "Enterprise"
    assert present(store.get_fact("user:1", "plan", by=readers["org1"], as_of=long_ago)).value == "plan 0-1"


def test_readers_going_round_more_orgs_than_the_cells_hold_keep_the_held_ones(tmp_path):
    """With room for about two orgs' heads, new readers go round six orgs at now. The two
    orgs held answer from their cells; the others are picked from their histories and their
    cells go again, so each round two reads hit (LRU alone: none, each read evicting the org
    the round asks next). An org then read more often than a held one takes its place."""
    store, _, _, readers = _orgs_with_five_days_of_plans(tmp_path)
    assert present(store.get_fact("user:1", "plan", by=readers["org0"])).value == "plan 4-1"
    one = sum(query._cell_bytes(c) for cs in store.vis._heads.values() for c in cs)
    store.vis.clear_cache()
    store.vis.budget = dataclasses.replace(store.vis.budget, heads=one * 5 // 2)

    def read(org, who):
        reader = ml.Principal(who, ml.Scope(org, "support", "t1", who), role="member")
        lines: list[str] = []
        with store.tracer(lines.append):
            assert present(store.get_fact("user:1", "plan", by=reader)).value == "plan 4-1"
        return any("slot heads (from cache" in line for line in lines)

    for round_ in range(4):
        hits = [org for org in readers if read(org, f"ann{round_}")]
        assert hits == ([] if round_ == 0 else ["org0", "org1"]), f"round {round_}"
        assert {org for _, org in store.vis._heads} == {"org0", "org1"}
    for again in range(2):  # org5 read once more than org1, the held org read last
        read("org5", f"bo{again}")
    assert {org for _, org in store.vis._heads} == {"org0", "org5"}


def test_the_read_cache_stats_count_the_history_queries_and_what_is_held(tmp_path):
    """`store.read_cache_stats()` says what the caches hold against their bounds and how many
    reads needed an org's history: as many queries as the tracer shows, the rest picks."""
    store, _, _, readers = _orgs_with_five_days_of_plans(tmp_path, orgs=4, read_cache_bytes=0)
    empty = store.read_cache_stats()
    assert (empty.history_queries, empty.history_picks, empty.heads_bytes, empty.history_orgs) == (0, 0, 0, 0)
    queries: list[str] = []
    with store.tracer(lambda line: queries.append(line) if "SELECT" in line else None):
        for day in range(3):
            for reader in readers.values():
                when = T0 + timedelta(days=day, hours=5)
                assert present(store.get_fact("user:1", "plan", by=reader, as_of=when)).value == f"plan {day}-1"
                stats = store.read_cache_stats()
                assert stats.history_queries == len(queries)
        assert present(store.get_fact("user:1", "plan", by=readers["org3"], as_of=T0 + timedelta(hours=4)))
    stats = store.read_cache_stats()
    assert stats.budget == query.CacheBudget(0, 0, 0)
    # the first history read is held (0 bytes keep what one read needs) and serves org0's later
    # days; org3's, read last, waits in the window and serves the read after the rounds
    assert stats.history_queries == len(queries) == 3 * len(readers) - 2
    assert stats.history_picks == 2 + 1
    assert stats.history_orgs == 1 and stats.head_orgs == 1  # 0 bytes: what the read under way needs
    assert stats.histories_bytes == next(iter(store.vis._histories.values()))[1].nbytes
    store.close()
    with pytest.raises(ml.StoreError, match="closed"):
        store.read_cache_stats()


def test_how_often_a_history_was_wanted_fades_so_an_org_busy_long_ago_gives_way():
    wants = query._RecentCounts()
    for _ in range(300):
        wants.add(("fact", "busy long ago"))
    for _ in range(4 * query.RECENT_COUNTS_HALVED_EVERY):
        wants.add(("fact", "the others"))
    for _ in range(60):
        wants.add(("fact", "busy now"))
    assert wants.count(("fact", "busy now")) > wants.count(("fact", "busy long ago")) > 0


def test_a_read_cache_bound_given_to_open_bounds_what_the_orgs_caches_hold(tmp_path):
    """`open(read_cache_bytes=)` bounds the cells and histories the reads keep: with room for
    about two orgs' histories, reads going round six orgs' past bases keep no more than the
    bound, and every read answers as it did with the default bound, which held all six."""
    store, now, _, readers = _orgs_with_five_days_of_plans(tmp_path)

    def read_round(s):
        return [
            present(s.get_fact("user:1", "plan", by=reader, as_of=T0 + timedelta(days=day, hours=5))).value
            for day in range(5)
            for reader in readers.values()
        ]

    assert read_round(store) == [f"plan {day}-1" for day in range(5) for _ in readers]
    assert store.vis.budget == query.CacheBudget.of(query.READ_CACHE_BYTES)
    assert len(store.vis._histories) == len(readers)  # the default bound holds every org
    one = max(h.nbytes for _, h in store.vis._histories.values())
    store.close()
    total = one * 5 * 8 // (2 * 3)  # histories get 3/8 of it: room for two and a half
    bounded = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), read_cache_bytes=total)
    assert bounded.vis.budget == query.CacheBudget.of(total)
    assert read_round(bounded) == [f"plan {day}-1" for day in range(5) for _ in readers]
    histories = [h.nbytes for _, h in bounded.vis._histories.values()]
    assert len(histories) == 2 and sum(histories) <= bounded.vis.budget.histories
    cells = [query._cell_bytes(c) for cs in bounded.vis._heads.values() for c in cs]
    assert sum(cells) <= bounded.vis.budget.heads or len(bounded.vis._heads) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, "512MB", True])
def test_a_read_cache_bound_that_is_not_a_byte_count_is_refused_before_a_store_is_made(tmp_path, bad):
    with pytest.raises(ml.ValidationError) as refused:
        ml.open(tmp_path / "s", read_cache_bytes=bad)
    assert refused.value.field == "read_cache_bytes"
    assert not (tmp_path / "s").exists()


def test_scopes_first_seen_together_in_one_advance_stay_apart_from_those_seen_later(tmp_path):
    """Two actors first written in one commit get codes of their own in the advanced heads,
    and so does an actor first written after them: no reader sees another actor's rows.

    A scope level's new values were numbered while the value -> code map grew, so two new
    values in one advance took codes n and n + 2, and the next new value took n + 2 again:
    its reader saw the second actor's rows (found by the model-based test of a history
    advance, whose scope levels were coded the same way)."""
    now = [T0 + timedelta(days=10)]
    store = ml.open(tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder())
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    actors = {a: ml.Principal(a, ml.Scope("acme", "support", "t1", a), role="member") for a in ("ann", "bob", "cy")}
    store.write(ml.Fact("user:1", "plan", "the org's", T0, source="crm"), by=lead)
    assert present(store.get_fact("user:1", "plan", by=actors["ann"])).value == "the org's"  # builds the heads
    lines: list[str] = []
    with store.tracer(lines.append):
        now[0] += timedelta(minutes=5)
        store.write_many(
            [ml.Fact("user:1", "plan", f"{a}'s", T0, source="crm", scope=actors[a].scope) for a in ("ann", "bob")],
            by=lead,
        )
        assert present(store.get_fact("user:1", "plan", by=actors["ann"])).value == "ann's"
        now[0] += timedelta(minutes=5)
        store.write(ml.Fact("user:1", "plan", "cy's", T0, source="crm", scope=actors["cy"].scope), by=lead)
        basis = store._basis(None, None, None)
        fast = {a: _fast(store, "fact", p, basis) for a, p in actors.items()}
    assert sum("advanced by the rows written since" in line for line in lines) >= 2  # the path under test ran
    for a, p in actors.items():
        assert fast[a] == _slow(store, "fact", p, basis), a
        assert present(store.get_fact("user:1", "plan", by=p)).value == f"{a}'s"
        assert [h.record.scope for h in store.recall("plan", by=p, kinds=["fact"])] == [p.scope]


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_heads_advanced_by_batches_at_scopes_never_seen_serve_what_the_query_returns(tmp_path, seed):
    """Batches of writes, some at teams and actors no row had yet (several in one batch, or
    one after another), with reads between at now and at a past basis: every reader of
    every scope seen gets what the per-reader query returns, and the heads and the history
    were advanced, not queried again. Seeds take turns at who advances the heads at now
    (``catch_up``): each batch's write, or the read after one or two batches."""
    rng = random.Random(seed)
    now = [T0 + timedelta(days=10)]
    store = ml.open(
        tmp_path / "s", clock=lambda: now[0], embedder=ml.HashingEmbedder(), catch_up=("write", "read")[seed % 2]
    )
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    scopes = [ml.Scope("acme"), ml.Scope("acme", "support")]
    store.write(ml.Fact("user:0", "plan", "Free", T0, source="crm"), by=lead)
    _fast(store, "fact", lead, store._basis(None, None, None))  # builds the org's heads
    lines: list[str] = []
    with store.tracer(lines.append):
        for step in range(24):
            now[0] += timedelta(minutes=rng.randrange(1, 30))
            batch = []
            for _ in range(rng.randrange(1, 4)):
                roll = rng.random()
                if roll < 0.3:  # an actor no row had yet, in a team seen or new
                    team = rng.choice([s for s in scopes if s.team is not None] or [ml.Scope("acme", "support", "t0")])
                    scope = ml.Scope("acme", "support", team.team, f"a{step}-{len(scopes)}")
                elif roll < 0.45:  # a team no row had yet
                    scope = ml.Scope("acme", "support", f"t{step}-{len(scopes)}")
                else:
                    scope = rng.choice(scopes)
                scopes.append(scope)
                batch.append(ml.Fact(rng.choice(SUBJECTS[:3]), "plan", f"v{step}", T0, source="crm", scope=scope))
            store.write_many(batch, by=lead)
            if rng.random() < 0.7:  # else the next batch arrives before a read: one advance takes both
                bases = [  # at now (the cell at now) and at a past basis (the org's history)
                    store._basis(None, None, None),
                    store._basis(None, now[0] - timedelta(minutes=rng.randrange(1, 60)), T0 + timedelta(days=1)),
                ]
                for scope in dict.fromkeys(scopes):
                    who = ml.Principal("reader", scope, role="member")
                    for basis in bases:
                        slow = _slow(store, "fact", who, basis)
                        assert _fast(store, "fact", who, basis) == slow, (step, scope, basis.describe())
    # the paths under test ran: the cell at now and the history, each advanced by the batches
    assert sum("advanced by the rows written since" in line for line in lines) >= 10
    assert store.read_cache_stats().history_advances >= 10
