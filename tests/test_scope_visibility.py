"""Scope is enforced by the store: own scope and ancestors, never siblings or descendants.

Property tests write memory across random scope trees (a steward per org backfills its
subtree with ``write_many``) and read it back as random principals; the permission
tests pin down who may write, propose and approve where.
"""

from __future__ import annotations

import tempfile
from datetime import datetime

import pytest
from _support import (
    AGENT,
    ALICE,
    BOB,
    BOT,
    CURATOR,
    MEMBER,
    ORG,
    SALES,
    SIBLING,
    STEWARD,
    SUPPORT,
    TIER1,
    TIER2,
    SimClock,
    day,
    episode,
    examples,
    fact,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml

ORGS = ("acme", "globex")
LEVEL_NAMES = (ORGS, ("support", "sales"), ("tier1", "tier2"), ("alice", "bob"))
ROLES = ("agent", "member", "curator", "steward")
SHARED = ("account:shared", "tier")  # one slot written at every scope of the tree


@st.composite
def scopes(draw) -> ml.Scope:
    depth = draw(st.integers(1, 4))
    return ml.Scope(*[draw(st.sampled_from(LEVEL_NAMES[i])) for i in range(depth)])


principals = st.builds(lambda s, r: ml.Principal(f"p-{r}", s, role=r), scopes(), st.sampled_from(ROLES))


def _record(kind: str, i: int, scope: ml.Scope):
    subject = f"item:{i}"
    if kind == "fact":
        return fact(subject, "note", f"memo {i} about plans", day(1), scope=scope)
    if kind == "episode":
        return episode("checkout", f"memo {i} about plans", "fixed", day(1), subject=subject, scope=scope)
    return ml.Reference(
        f"https://docs.example/{i}",
        f"memo {i}",
        f"about plans {i}",
        day(1),
        subject=subject,
        source="wiki",
        scope=scope,
    )


def _build(
    root: str, tree: list[ml.Scope], kinds: list[str]
) -> tuple[ml.MemoryStore, dict[str, ml.Scope], dict[str, str]]:
    """Write one item per (scope, kind) and the shared slot at every scope; return ids by scope."""
    store = ml.open(root, clock=SimClock(day(2)))
    item_scope: dict[str, ml.Scope] = {}
    subject_of: dict[str, str] = {}
    for org in ORGS:
        batch, where = [], []
        for i, (scope, kind) in enumerate(zip(tree, kinds, strict=False)):  # ten kinds drawn, one per scope
            if scope.org == org:
                batch.append(_record(kind, i, scope))
                batch.append(fact(*SHARED, scope.path, day(1), scope=scope))
                where += [(scope, f"item:{i}"), None]
        if not batch:
            continue
        res = store.write_many(batch, by=ml.Principal(f"dpo-{org}", ml.Scope(org), role="steward"))
        assert len(res) == len(batch) and res.count("duplicate") == 0
        for r, w in zip(res, where, strict=True):
            if w is not None:
                item_scope[r.record_id] = w[0]
                subject_of[r.record_id] = w[1]
    return store, item_scope, subject_of


FILTERS = st.one_of(
    st.builds(lambda v: {"org": v}, st.sampled_from(ORGS)),
    st.builds(lambda v: {"division": v}, st.sampled_from(LEVEL_NAMES[1])),
    st.builds(lambda v: {"team": v}, st.sampled_from(LEVEL_NAMES[2])),
    st.builds(lambda v: {"actor": v}, st.sampled_from(LEVEL_NAMES[3])),
    st.builds(lambda v: {"team": None, "org": v}, st.sampled_from(ORGS)),
    st.builds(lambda i: {"subject": f"item:{i}"}, st.integers(0, 11)),
    st.just({"attribute": "note"}),
    st.just({"status": "proposed"}),
    st.just({"status": "active"}),
    st.just({"source": "test@v1"}),
)


KINDS = ["fact", "episode", "reference"]


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tree=st.lists(scopes(), min_size=1, max_size=10, unique=True),
    kinds=st.lists(st.sampled_from(KINDS), min_size=10, max_size=10),
    readers=st.lists(principals, min_size=1, max_size=2),
    filters=st.lists(FILTERS, min_size=1, max_size=2),
    pick=st.randoms(use_true_random=False),
)
def test_a_principal_recalls_exactly_its_own_and_its_ancestors_memory_never_a_siblings(
    tree, kinds, readers, filters, pick
):
    with tempfile.TemporaryDirectory() as root:
        _check_recall(*_build(root, tree, kinds), readers, filters, pick)


def _check_recall(store, item_scope, subject_of, readers, filters, pick) -> None:
    for p in readers:
        hits = store.recall("memo plans", by=p, k=1000, kinds=KINDS)
        for h in hits:
            assert h.record.scope.contains(p.scope), f"{p.scope} was served {h.record.scope}"
        expected_items = {rid for rid, s in item_scope.items() if s.contains(p.scope)}
        got_items = {h.record_id for h in hits if h.record.subject_name.startswith("item:")}
        assert got_items == expected_items

        for f in filters:
            if {"org", "division", "team", "actor"} & set(f):
                with pytest.raises(ml.ValidationError) as err:
                    store.recall("memo plans", by=p, k=1000, kinds=KINDS, filters=f)
                assert err.value.field == "filters"
                continue
            narrowed = {h.record_id for h in store.recall("memo plans", by=p, k=1000, kinds=KINDS, filters=f)}
            assert narrowed <= {h.record_id for h in hits}

        hidden = sorted(subject_of[rid] for rid, s in item_scope.items() if not s.contains(p.scope))
        if hidden:  # naming a hidden subject outright does not reveal it either
            subject = pick.choice(hidden)
            assert store.recall(subject, by=p, subject=subject, k=50, kinds=KINDS) == []


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tree=st.lists(scopes(), min_size=1, max_size=8, unique=True),
    readers=st.lists(principals, min_size=1, max_size=2),
)
def test_get_fact_serves_the_most_specific_visible_scope_and_never_a_sibling_or_descendant(tree, readers):
    with tempfile.TemporaryDirectory() as root:
        _check_get_fact(*_build(root, tree, ["fact"] * len(tree)), tree, readers)


def _check_get_fact(store, item_scope, subject_of, tree, readers) -> None:
    for p in readers:
        got = store.get_fact(*SHARED, by=p)
        visible = [s for s in tree if s.contains(p.scope)]
        if not visible:
            assert got is None
            continue
        most_specific = max(visible, key=lambda s: s.depth)
        assert got is not None and got.scope == most_specific and got.value == most_specific.path
        for rid, s in item_scope.items():
            answer = store.get_fact(subject_of[rid], "note", by=p)
            assert (answer is not None) == s.contains(p.scope)
            if answer is not None:
                assert answer.record_id == rid


# --------------------------------------------------------------------------- who may write where


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory) -> ml.MemoryStore:
    return ml.open(tmp_path_factory.mktemp("perm") / "store")


def _may_write(p: ml.Principal, target: ml.Scope) -> bool:
    """API.md: agents only propose; members write at their own scope; curators and stewards in their subtree."""
    if p.role == "agent":
        return False
    if p.role == "member":
        return target == p.scope
    return p.scope.contains(target)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=principals, target=scopes(), n=st.integers(0, 10**9))
def test_a_write_succeeds_exactly_where_the_role_allows(shared_store, p, target, n):
    record = fact(f"perm:{n}", "x", n, day(1), scope=target)
    if _may_write(p, target):
        res = shared_store.write(record, by=p)
        assert res.scope == target and res.action in ("inserted", "duplicate")
    else:
        with pytest.raises(ml.PermissionDenied):
            shared_store.write(record, by=p)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_scope=scopes(), target=scopes(), n=st.integers(0, 10**9))
def test_an_agent_proposes_only_at_its_scope_or_an_ancestor(shared_store, agent_scope, target, n):
    bot = ml.Principal("bot", agent_scope, role="agent")
    record = fact(f"prop:{n}", "x", n, day(1), scope=target)
    if target.contains(agent_scope):
        assert shared_store.propose(record, by=bot).scope == target
    else:
        with pytest.raises(ml.PermissionDenied):
            shared_store.propose(record, by=bot)


def test_a_member_writing_outside_its_own_scope_is_denied(store):
    for target in (BOB, TIER2, SUPPORT, ORG, ALICE):
        record = fact("user:42", "plan", "Pro", day(1), scope=target)
        if target == MEMBER.scope:
            assert store.write(record, by=MEMBER).action == "inserted"
        else:
            with pytest.raises(ml.PermissionDenied):
                store.write(record, by=MEMBER)
    with pytest.raises(ml.PermissionDenied):
        store.write(fact("user:42", "plan", "Pro", day(1)), by=MEMBER, scope=TIER2)
    team_member = ml.Principal("teammate", TIER2, role="member")
    with pytest.raises(ml.PermissionDenied):  # a descendant is outside a member's own scope too
        store.write(fact("user:42", "plan", "Pro", day(1), scope=ALICE), by=team_member)


def test_a_curator_writes_inside_its_subtree_but_not_at_a_sibling_or_ancestor(store):
    assert store.write(fact("user:1", "plan", "Pro", day(1), scope=ALICE), by=CURATOR).scope == ALICE
    assert store.write(fact("user:1", "plan", "Pro", day(1)), by=CURATOR).scope == TIER2
    for target in (TIER1, BOB, SUPPORT, ORG, SALES):
        with pytest.raises(ml.PermissionDenied):
            store.write(fact("user:1", "plan", "Pro", day(1), scope=target), by=CURATOR)


def test_an_agents_direct_write_is_denied_even_at_its_own_scope(store):
    for target in (BOT, TIER2):
        with pytest.raises(ml.PermissionDenied):
            store.write(fact("user:42", "plan", "Pro", day(1), scope=target), by=AGENT)
    with pytest.raises(ml.PermissionDenied):
        store.write_many([fact("user:42", "plan", "Pro", day(1))], by=AGENT)


def test_an_agent_proposes_at_an_ancestor_but_not_at_a_sibling_or_a_cousin(store):
    for target in (BOT, TIER2, SUPPORT, ORG):
        assert store.propose(fact("user:42", "plan", "Pro", day(1)), by=AGENT, scope=target).scope == target
    for target in (ALICE, TIER1, BOB, SALES):
        with pytest.raises(ml.PermissionDenied):
            store.propose(fact("user:42", "plan", "Pro", day(1)), by=AGENT, scope=target)


READERS = (AGENT, MEMBER, CURATOR, STEWARD)


def _served(store, **basis) -> set[str]:
    out = set()
    for p in READERS:
        out |= {h.record_id for h in store.recall("plan", by=p, k=100, kinds=["fact"], **basis)}
        out |= {
            h.record_id
            for h in store.recall("plan", by=p, k=100, kinds=["fact"], filters={"status": "proposed"}, **basis)
        }
        got = store.get_fact("user:42", "plan", by=p, **basis)
        if got is not None:
            out.add(got.record_id)
    return out


def test_a_proposal_is_never_recalled_until_it_is_approved(store, clock):
    clock.set(day(2))
    prop = store.propose(fact("user:42", "plan", "Enterprise Pro", day(1)), by=AGENT, scope=TIER2)
    assert _served(store) == set()
    proposed_at = clock.now
    clock.advance(hours=1)
    approved = store.approve(prop.record_id, by=CURATOR)
    assert approved.record_id != prop.record_id and approved.supersedes == prop.record_id
    assert prop.record_id not in _served(store)
    for p in (AGENT, MEMBER, CURATOR):
        got = store.get_fact("user:42", "plan", by=p)
        assert got is not None and got.record_id == approved.record_id and got.status == "active"
        assert store.get_fact("user:42", "plan", by=p, as_of=proposed_at) is None
    # approved at tier2: neither tier1's memory nor (a descendant) the org steward's
    assert store.get_fact("user:42", "plan", by=SIBLING) is None
    assert store.get_fact("user:42", "plan", by=STEWARD) is None


def test_a_curator_cannot_approve_its_own_proposal_but_another_curator_can(store, clock):
    clock.set(day(2))
    prop = store.propose(fact("user:42", "plan", "Pro", day(1)), by=CURATOR)
    with pytest.raises(ml.PermissionDenied):
        store.approve(prop.record_id, by=CURATOR)
    assert store.get_fact("user:42", "plan", by=MEMBER) is None
    store.approve(prop.record_id, by=STEWARD)
    assert store.get_fact("user:42", "plan", by=MEMBER).value == "Pro"


def test_agents_members_and_curators_elsewhere_cannot_approve(store):
    prop = store.propose(fact("user:42", "plan", "Pro", day(1)), by=AGENT, scope=TIER2)
    other_curator = ml.Principal("tier1-lead", TIER1, role="curator")
    for who in (AGENT, ml.Principal("bot2", BOT, role="agent"), MEMBER, other_curator):
        with pytest.raises(ml.PermissionDenied):
            store.approve(prop.record_id, by=who)
    assert _served(store) == set()


@pytest.mark.parametrize(
    "filters",
    [
        {"confidence": "high"},
        {"valid_from": "yesterday"},
        {"valid_from": datetime(2026, 1, 1)},
        {"subject": 5},
        {"derived_from": "fac_1"},
        {"priority": "high"},
    ],
)
def test_an_ill_typed_filter_is_a_validation_error_not_a_sql_error(store, filters):
    store.write(fact("user:42", "plan", "Pro", day(0), confidence=0.5), by=MEMBER)
    with pytest.raises(ml.ValidationError) as err:
        store.recall("plan", by=MEMBER, kinds=["fact", "policy"], filters=filters)
    assert err.value.field == "filters"


def test_a_well_typed_filter_narrows(store, clock):
    clock.set(day(2))
    store.write(fact("user:42", "plan", "Pro", day(0), confidence=0.5), by=MEMBER)
    store.write(fact("user:43", "plan", "Pro", day(1), confidence=0.9), by=MEMBER)
    for filters, expected in [
        ({"confidence": 0.5}, {"user:42"}),
        ({"valid_from": day(1)}, {"user:43"}),
        ({"valid_from": day(1).isoformat()}, {"user:43"}),
        ({"subject": "user:43"}, {"user:43"}),
        ({"confidence": 0.7}, set()),
    ]:
        hits = store.recall("plan", by=MEMBER, kinds=["fact"], filters=filters)
        assert {h.record.subject for h in hits} == expected, filters


def test_a_scope_pickled_to_another_process_keys_dicts_there():
    """Scopes cache their hash; a cached hash must not travel (string hashes differ per process)."""
    import pickle
    import subprocess
    import sys

    scope = ml.Scope("acme", "support", "tier2")
    hash(scope)  # caches the hash here (a dict key would too)
    code = (
        "import pickle, sys; import memory_lakehouse as ml; s = pickle.loads(sys.stdin.buffer.read()); "
        "print({ml.Scope('acme', 'support', 'tier2'): 1}.get(s))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(scope),
        capture_output=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert out.stdout.decode().strip() == "1"
