"""Reads are evaluated at a basis (known_at, valid_at): system time and world time.

The property test drives one fact slot through random versions, retractions and clock
steps, and checks every read and every reconcile decision against a reference model a
few lines long. The stories below pin the cases the seeds tell.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from _support import ALICE, MEMBER, ORG, STEWARD, TIER2, SimClock, day, episode, examples, fact
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml

US = timedelta(microseconds=1)
SLOT = ("user:42", "plan")


# --------------------------------------------------------------------------- the reference model


@dataclass
class Row:
    record_id: str
    scope: ml.Scope
    value: str
    valid_from: datetime
    valid_to: datetime | None
    expires_at: datetime | None
    known_since: datetime
    seq: int  # commit order
    retracts: str | None = None  # set on a retraction row

    def ends(self) -> datetime | None:
        ends = [t for t in (self.valid_to, self.expires_at) if t is not None]
        return min(ends) if ends else None


class Model:
    """What the store must answer, computed from the rows it wrote (one slot, several scopes)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def _live(self, known_at: datetime | None, scope: ml.Scope) -> list[Row]:
        known = [r for r in self.rows if known_at is None or r.known_since <= known_at]
        gone = {r.retracts for r in known if r.retracts}
        return [r for r in known if not r.retracts and r.record_id not in gone and r.scope == scope]

    def head(self, reader: ml.Scope, known_at: datetime, valid_at: datetime) -> Row | None:
        """Per scope: latest valid_from, then latest commit; an ended head is not served; most specific wins."""
        for scope in reversed(reader.ancestors()):
            cands = [r for r in self._live(known_at, scope) if r.valid_from <= valid_at]
            if not cands:
                continue
            head = max(cands, key=lambda r: (r.valid_from, r.known_since, r.seq))
            ends = head.ends()
            if ends is None or ends > valid_at:
                return head
        return None

    def reconcile(
        self, scope: ml.Scope, value: str, valid_from: datetime, valid_to: datetime | None
    ) -> tuple[str, Row | None]:
        """Same content as the version in force at valid_from (same scope): duplicate; else superseded."""
        before = [r for r in self._live(None, scope) if r.valid_from <= valid_from]
        pred = max(before, key=lambda r: (r.valid_from, r.seq)) if before else None
        if pred is None:
            return "inserted", None
        pred_ends = pred.ends()
        in_force = pred_ends is None or pred_ends > valid_from
        if (pred.value, pred.valid_to) == (value, valid_to) and in_force:
            return "duplicate", pred
        return "superseded", pred


# --------------------------------------------------------------------------- the property

STEP = st.sampled_from([timedelta(0), timedelta(hours=1), timedelta(days=1), timedelta(days=3)])
WRITE_SCOPES = (ALICE, ALICE, TIER2, ORG)  # the reader's own scope most often, then its ancestors
READERS = (MEMBER, ml.Principal("teammate", TIER2, role="member"))

write_op = st.tuples(
    st.just("write"),
    STEP,
    st.integers(0, 20),
    st.sampled_from("ABC"),
    st.one_of(st.none(), st.integers(1, 10)),
    st.one_of(st.none(), st.integers(1, 15)),
    st.sampled_from(WRITE_SCOPES),
)
retract_op = st.tuples(st.just("retract"), STEP, st.integers(0, 50))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.one_of(write_op, write_op, write_op, retract_op), min_size=1, max_size=8), data=st.data())
def test_get_fact_answers_every_basis_exactly_as_the_reference_model(ops, data):
    clock = SimClock(day(0))
    model = Model()
    with tempfile.TemporaryDirectory() as root:
        store = ml.open(root, clock=clock)
        for op in ops:
            clock.advance(op[1])
            if op[0] == "retract":
                targets = [r for r in model.rows if not r.retracts]
                if not targets:
                    continue
                t = targets[op[2] % len(targets)]
                res = store.retract(t.record_id, by=STEWARD, reason="wrong")
                model.rows.append(
                    Row(
                        res.record_id,
                        t.scope,
                        t.value,
                        t.valid_from,
                        t.valid_to,
                        t.expires_at,
                        clock.now,
                        len(model.rows),
                        retracts=t.record_id,
                    )
                )
                continue
            _, _, vf_day, value, vt_days, exp_days, scope = op
            vf = day(vf_day)
            vt = vf + timedelta(days=vt_days) if vt_days else None
            exp = vf + timedelta(days=exp_days) if exp_days else None
            expected_action, pred = model.reconcile(scope, value, vf, vt)
            res = store.write(fact(*SLOT, value, vf, valid_to=vt, expires_at=exp, scope=scope), by=STEWARD)
            assert res.action == expected_action
            if expected_action == "duplicate":
                assert pred is not None  # a duplicate restates the model's head
                assert res.record_id == pred.record_id
                continue
            assert res.supersedes == (pred.record_id if pred else None)
            assert res.known_since == clock.now
            model.rows.append(Row(res.record_id, scope, value, vf, vt, exp, clock.now, len(model.rows)))

        times = sorted({r.known_since for r in model.rows} | {day(0)})
        worlds = sorted({t for r in model.rows for t in (r.valid_from, r.valid_to, r.expires_at) if t} | {day(0)})

        def near(ts: list[datetime]) -> st.SearchStrategy[datetime]:
            return st.sampled_from(ts).flatmap(lambda t: st.sampled_from([t - US, t, t + US, t + timedelta(hours=12)]))

        for _ in range(5):
            reader = data.draw(st.sampled_from(READERS), "reader")
            known_at, valid_at = data.draw(near(times), "known_at"), data.draw(near(worlds), "valid_at")
            want = model.head(reader.scope, known_at, valid_at)
            got = store.get_fact(*SLOT, by=reader, known_at=known_at, valid_at=valid_at)
            assert (got and got.record_id) == (want and want.record_id), (reader.id, known_at, valid_at)
            if got is not None:
                assert want is not None  # the ids agreed just above
                assert (got.value, got.scope, got.known_since) == (want.value, want.scope, want.known_since)
            as_of = data.draw(near(times + worlds), "as_of")
            want = model.head(reader.scope, as_of, as_of)
            got = store.get_fact(*SLOT, by=reader, as_of=as_of)
            assert (got and got.record_id) == (want and want.record_id), (reader.id, as_of)
        for reader in READERS:  # the default basis is the store clock's now
            want = model.head(reader.scope, clock.now, clock.now)
            got = store.get_fact(*SLOT, by=reader)
            assert (got and got.record_id) == (want and want.record_id)


# --------------------------------------------------------------------------- naive datetimes

NAIVE = datetime(2026, 1, 10, 12, 0)


@pytest.mark.parametrize("arg", ["as_of", "known_at", "valid_at"])
def test_a_naive_datetime_in_a_read_basis_is_a_validation_error_naming_the_argument(store, arg):
    store.write(fact(*SLOT, "Pro", day(0)), by=MEMBER)
    with pytest.raises(ml.ValidationError) as err:
        store.get_fact(*SLOT, by=MEMBER, **{arg: NAIVE})
    assert err.value.field == arg and arg in str(err.value)
    with pytest.raises(ml.ValidationError):
        store.recall("plan", by=MEMBER, **{arg: NAIVE})
    with pytest.raises(ml.ValidationError):
        store.episodes(service="checkout", env="prod", by=MEMBER, **{arg: NAIVE})


def test_a_naive_datetime_is_never_assumed_to_be_utc_even_when_the_wall_clocks_agree(store):
    store.write(fact(*SLOT, "Pro", day(0)), by=MEMBER)
    aware = store.get_fact(*SLOT, by=MEMBER, valid_at=day(5))
    assert aware is not None
    with pytest.raises(ml.ValidationError):
        store.get_fact(*SLOT, by=MEMBER, valid_at=day(5).replace(tzinfo=None))


# --------------------------------------------------------------------------- the stories


def test_the_subscription_upgrade_is_answered_per_basis(store, clock):
    clock.set(day(1))
    free = store.write(fact(*SLOT, "Free Starter", day(1), source="billing"), by=MEMBER)
    clock.set(day(14))
    pro = store.write(fact(*SLOT, "Enterprise Pro", day(14), source="billing"), by=MEMBER)
    assert pro.action == "superseded" and pro.supersedes == free.record_id
    clock.set(day(30))

    assert store.get_fact(*SLOT, by=MEMBER, as_of=day(20)).value == "Enterprise Pro"
    assert store.get_fact(*SLOT, by=MEMBER, as_of=day(10)).value == "Free Starter"
    assert store.get_fact(*SLOT, by=MEMBER, valid_at=day(10)).value == "Free Starter"  # known now
    assert store.get_fact(*SLOT, by=MEMBER, known_at=day(10), valid_at=day(20)).value == "Free Starter"
    plans = [h.record.value for h in store.recall("plan", by=MEMBER, subject="user:42", kinds=["fact"], as_of=day(20))]
    assert plans == ["Enterprise Pro"]  # the superseded plan is not served beside the current one


def test_a_row_learned_an_hour_after_a_decision_is_not_seen_by_the_as_of_read_of_that_decision(store, clock):
    decided_at = day(10, hours=9)
    clock.set(decided_at + timedelta(hours=1))
    store.write(fact("order:7", "refund", "approved", day(9)), by=MEMBER)  # true since day 9, learned later

    assert store.get_fact("order:7", "refund", by=MEMBER, as_of=decided_at) is None
    assert store.recall("refund", by=MEMBER, as_of=decided_at) == []
    assert (
        store.get_fact(
            "order:7", "refund", by=MEMBER, known_at=decided_at + timedelta(hours=1), valid_at=decided_at
        ).value
        == "approved"
    )
    assert store.get_fact("order:7", "refund", by=MEMBER, valid_at=decided_at).value == "approved"


def test_a_retraction_hides_a_record_from_later_reads_but_not_from_an_as_of_read_before_it(store, clock):
    clock.set(day(1))
    first = store.write(fact(*SLOT, "Free Starter", day(1)), by=MEMBER)
    clock.set(day(2))
    wrong = store.write(fact(*SLOT, "Platinum", day(2)), by=MEMBER)
    clock.set(day(5))
    store.retract(wrong.record_id, by=MEMBER, reason="typo in the CRM import")
    clock.set(day(6))

    assert store.get_fact(*SLOT, by=MEMBER, as_of=day(3)).record_id == wrong.record_id
    assert store.get_fact(*SLOT, by=MEMBER).record_id == first.record_id  # the earlier version is back
    assert store.get_fact(*SLOT, by=MEMBER, known_at=day(6), valid_at=day(3)).record_id == first.record_id
    assert wrong.record_id not in {h.record_id for h in store.recall("plan", by=MEMBER)}


def test_a_preference_expires_after_the_default_ttl(store, clock):
    clock.set(day(1))
    store.write(ml.Preference("user:42", "tone", "brief", day(1), source="user_explicit"), by=MEMBER)
    ttl = timedelta(days=180)
    got = store.get_fact("user:42", "tone", by=MEMBER, kind="preference", valid_at=day(1) + ttl - US)
    assert got is not None and got.expires_at == day(1) + ttl
    assert store.get_fact("user:42", "tone", by=MEMBER, kind="preference", valid_at=day(1) + ttl) is None
    assert store.recall("tone", by=MEMBER, kinds=["preference"], valid_at=day(200)) == []


def test_a_preference_without_ttl_or_with_its_own_ttl_expires_accordingly(store, clock):
    clock.set(day(1))
    store.write(ml.Preference("user:1", "tone", "brief", day(1), ttl=None, source="user_explicit"), by=MEMBER)
    store.write(ml.Preference("user:2", "tone", "brief", day(1), ttl=timedelta(days=7), source="u"), by=MEMBER)
    assert store.get_fact("user:1", "tone", by=MEMBER, kind="preference", valid_at=day(5000)) is not None
    assert store.get_fact("user:2", "tone", by=MEMBER, kind="preference", valid_at=day(7)) is not None
    assert store.get_fact("user:2", "tone", by=MEMBER, kind="preference", valid_at=day(8)) is None


def test_a_preference_restated_after_it_expired_is_served_again(store, clock):
    clock.set(day(1))
    store.write(ml.Preference("user:42", "tone", "brief", day(1), source="user_explicit"), by=MEMBER)
    clock.set(day(200))
    again = store.write(ml.Preference("user:42", "tone", "brief", day(200), source="user_explicit"), by=MEMBER)
    assert again.action != "duplicate"  # the old version was no longer in force: this is news
    got = store.get_fact("user:42", "tone", by=MEMBER, kind="preference")
    assert got is not None and got.record_id == again.record_id and got.value == "brief"
    assert store.get_fact("user:42", "tone", by=MEMBER, kind="preference", as_of=day(190)) is None


def test_a_restatement_while_the_version_is_in_force_is_a_duplicate(store, clock):
    clock.set(day(1))
    first = store.write(ml.Preference("user:42", "tone", "brief", day(1), source="user_explicit"), by=MEMBER)
    clock.set(day(2))
    again = store.write(ml.Preference("user:42", "tone", "brief", day(1), source="user_explicit"), by=MEMBER)
    assert again.action == "duplicate" and again.record_id == first.record_id


def test_a_failed_episode_expires_after_90_days_and_a_fix_does_not(store, clock):
    clock.set(day(1))
    store.write(episode("checkout", "timeouts on pay", "failed", day(1), action="raise pool size"), by=MEMBER)
    store.write(
        episode(
            "checkout",
            "timeouts on pay",
            "fixed",
            day(1),
            action="roll back v2.4",
            evidence="https://tracker.example/INC-2",
        ),
        by=MEMBER,
    )

    def tried(at):
        return sorted(e.outcome for e in store.episodes(service="checkout", env="prod", by=MEMBER, valid_at=at))

    assert tried(day(1)) == ["failed", "fixed"]
    assert tried(day(91) - US) == ["failed", "fixed"]
    assert tried(day(91)) == ["fixed"]
    assert tried(day(400)) == ["fixed"]


def test_an_explicit_expiry_overrides_the_failed_episode_default(store, clock):
    clock.set(day(1))
    store.write(episode("search", "slow queries", "failed", day(1), expires_at=day(10)), by=MEMBER)
    assert store.episodes(service="search", env="prod", by=MEMBER, valid_at=day(9))
    assert not store.episodes(service="search", env="prod", by=MEMBER, valid_at=day(10))


def test_a_note_expires_after_its_ttl(store, clock):
    clock.set(day(1))
    store.write(ml.Note("sess-1", "draft", "reply with the refund link", ttl=timedelta(hours=2)), by=MEMBER)
    store.write(ml.Note("sess-1", "customer", "prefers email"), by=MEMBER)  # default TTL: 4 hours
    written_at = clock.now

    def notes(**basis):
        return sorted(h.record.key for h in store.recall("draft customer", by=MEMBER, kinds=["note"], **basis))

    assert notes() == ["customer", "draft"]
    clock.advance(hours=3)
    assert notes() == ["customer"]
    assert notes(as_of=written_at + timedelta(hours=1)) == ["customer", "draft"]
    clock.advance(hours=2)
    assert notes() == []
    assert notes(valid_at=written_at + timedelta(hours=4) - US) == ["customer"]


def test_a_note_restated_after_it_expired_is_served_again(store, clock):
    clock.set(day(1))
    store.write(ml.Note("sess-1", "draft", "v1", ttl=timedelta(hours=1)), by=MEMBER)
    clock.advance(hours=2)
    again = store.write(ml.Note("sess-1", "draft", "v1", ttl=timedelta(hours=1)), by=MEMBER)
    assert again.action != "duplicate"
    assert [h.record.value for h in store.recall("draft", by=MEMBER, kinds=["note"])] == ["v1"]


def test_the_default_basis_includes_every_commit_already_in_the_store(tmp_path):
    ahead, behind = SimClock(day(0)), SimClock(day(0))
    writer = ml.open(tmp_path / "store", clock=ahead)
    reader = ml.open(tmp_path / "store", clock=behind)
    ahead.set(day(5))
    behind.set(day(3))  # another machine's clock, a little behind
    written = writer.write(fact(*SLOT, "Pro", day(0)), by=MEMBER)
    first = reader.get_fact(*SLOT, by=MEMBER)
    assert first is not None and first.record_id == written.record_id
