"""A plain reference model of the store's rules, and a Hypothesis state machine that
drives the real store and the model with the same random operations.

The model is the second opinion: it restates the README's rules in a few lines of
plain Python over a list of rows and imports none of the library's rules (only its
record types, to build the records it writes, and its errors, to expect them). Where
store and model disagree, one of them is wrong — decide by README/DESIGN.

Reuse: subclass `MemoryMachine` and add ``@rule``s (a maintenance step, a cache
warm-up); every read rule compares the store with the model through `check_reads`,
so whatever a new step changes (or a cache remembers) is checked by the existing
reads. `MemoryMachine.fresh_reads` (a second handle on the same store, nothing
remembered) is compared too. See tests/test_model_based.py for the settings.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from _recording import Recording
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import memory_lakehouse as ml

Level = str | None
ScopeT = tuple[str, Level, Level, Level]  # (org, division, team, actor)

SUBJECTS = ("user:1", "user:2", "alice")  # "alice" is also an actor: forgetting her hides her scope's rows
ATTRIBUTES = ("plan", "seats")
VALUES = ("A", "B", "C")
SOURCES = ("crm", "user_explicit")
KINDS = ("fact", "preference")


# ---------------------------------------------------------------------------- the model


@dataclass
class MRow:
    """One stored row as the model sees it."""

    record_id: str
    kind: str
    subject: str
    attribute: str
    value: str
    source: str
    scope: ScopeT
    valid_from: datetime
    valid_to: datetime | None
    expires_at: datetime | None
    status: str  # active | proposed | retracted (a retraction marker)
    known_since: datetime
    seq: int  # commit order
    pos: int  # position inside its commit
    generation: int
    supersedes: str | None
    proposer: str | None = None

    @property
    def slot(self) -> tuple[str, str, str]:
        return (self.kind, self.subject, self.attribute)

    @property
    def ends_at(self) -> datetime | None:
        ends = [t for t in (self.valid_to, self.expires_at) if t is not None]
        return min(ends) if ends else None


@dataclass
class MTomb:
    subject: str
    generation: int
    at: datetime
    scope: tuple[str, Level, Level]  # the steward's org, division, team


@dataclass
class MRecord:
    """What the machine asks to write (before the store assigns ids)."""

    kind: str
    subject: str
    attribute: str
    value: str
    source: str
    scope: ScopeT
    valid_from: datetime
    valid_to: datetime | None = None
    ttl_days: int | None = None  # preferences: expires valid_from + ttl

    @property
    def expires_at(self) -> datetime | None:
        return self.valid_from + timedelta(days=self.ttl_days) if self.ttl_days is not None else None


def depth(scope: ScopeT) -> int:
    return sum(1 for level in scope if level is not None)


def sees(reader: ScopeT, row: ScopeT) -> bool:
    """A reader sees its own scope and its ancestors'."""
    return row[0] == reader[0] and all(r is None or r == p for r, p in zip(row[1:], reader[1:], strict=True))


def contains(outer: ScopeT, inner: ScopeT) -> bool:
    """*inner* is *outer* or inside its subtree."""
    return all(o is None or o == i for o, i in zip(outer, inner, strict=True))


def covers(tomb: MTomb, scope: ScopeT) -> bool:
    return all(t is None or t == s for t, s in zip(tomb.scope, scope[:3], strict=True))


@dataclass
class Model:
    rows: list[MRow] = field(default_factory=list)
    tombs: list[MTomb] = field(default_factory=list)
    seq: int = 0

    # --- the ledger

    def generation(self, subject: str) -> int:
        return max((t.generation for t in self.tombs if t.subject == subject), default=0)

    def hidden(self, row: MRow) -> bool:
        """Forgotten: rows of the subject from an older generation, rows of a forgotten actor's
        scope known by the forget — inside the forget's subtree, at every basis."""
        return any(
            covers(t, row.scope)
            and (
                (t.subject == row.subject and row.generation < t.generation)
                or (t.subject == row.scope[3] and row.known_since <= t.at)
            )
            for t in self.tombs
        )

    def erased(self, rec: MRecord) -> bool:
        """History a forget erased: a tombstone of its subject (or its actor) covering it, at or after valid_from."""
        return any(
            covers(t, rec.scope) and t.subject in (rec.subject, rec.scope[3]) and rec.valid_from <= t.at
            for t in self.tombs
        )

    def retracted_at(self, row: MRow) -> datetime | None:
        times = [  # a retraction acts within its own org (`query.retractions_sql`)
            r.known_since
            for r in self.rows
            if r.status == "retracted" and r.supersedes == row.record_id and r.scope[0] == row.scope[0]
        ]
        return min(times) if times else None

    def find(self, record_id: str) -> MRow | None:
        """A stored row a raw lookup by id finds (not erased, not forgotten)."""
        for r in self.rows:
            if r.record_id == record_id and not self.hidden(r):
                return r
        return None

    # --- writes

    def plan(
        self,
        records: list[MRecord],
        status: str,
        *,
        supersedes: str | None = None,
        expires: list[datetime | None] | None = None,
    ) -> list[tuple[str, MRow | None]]:
        """Expected action per record and the row it adds (None for duplicate / forgotten)."""
        self.seq += 1
        out: list[tuple[str, MRow | None]] = []
        batch: list[MRow] = []
        for pos, rec in enumerate(records):
            if self.erased(rec):
                out.append(("forgotten", None))
                continue
            expires_at = expires[pos] if expires is not None else rec.expires_at
            pred = None
            if status == "active":
                versions = [
                    r
                    for r in self.rows + batch
                    if r.status == "active"
                    and r.slot == (rec.kind, rec.subject, rec.attribute)
                    and r.scope == rec.scope
                    and not self.hidden(r)
                    and self.retracted_at(r) is None
                ]
                versions = [r for r in versions if r.valid_from <= rec.valid_from]
                pred = max(versions, key=lambda r: (r.valid_from, r.seq, r.pos), default=None)
            if (
                pred is not None
                and pred.value == rec.value
                and pred.valid_to == rec.valid_to
                and (pred.ends_at is None or pred.ends_at > rec.valid_from)
            ):
                out.append(("duplicate", None))
                continue
            points_to = supersedes or (pred.record_id if pred is not None else None)
            row = MRow(
                f"new:{self.seq}:{pos}",
                rec.kind,
                rec.subject,
                rec.attribute,
                rec.value,
                rec.source,
                rec.scope,
                rec.valid_from,
                rec.valid_to,
                expires_at,
                status,
                # known at the commit (`_apply` sets it): after every forget so far, so a row of the
                # batch is never a forgotten actor's row to the batch's later records
                datetime.max.replace(tzinfo=UTC),
                self.seq,
                pos,
                self.generation(rec.subject),
                points_to,
            )
            batch.append(row)
            out.append(("superseded" if points_to else "inserted", row))
        return out

    # --- reads

    def visible(self, reader: ScopeT, kind: str, known_at: datetime, valid_at: datetime) -> list[MRow]:
        """Heads at the basis: system time, scope, ledger, status, supersession per slot and
        scope depth, end and expiry, then the most specific scope."""
        heads: dict[tuple, MRow] = {}
        for r in self.rows:
            if not (
                r.kind == kind
                and r.status == "active"
                and sees(reader, r.scope)
                and r.known_since <= known_at
                and r.valid_from <= valid_at
                and not self.hidden(r)
            ):
                continue
            retracted = self.retracted_at(r)
            if retracted is not None and retracted <= known_at:
                continue
            key = (r.slot, depth(r.scope))
            if key not in heads or (r.valid_from, r.known_since, r.seq, r.pos) > (
                heads[key].valid_from,
                heads[key].known_since,
                heads[key].seq,
                heads[key].pos,
            ):
                heads[key] = r
        best: dict[tuple, MRow] = {}
        for (slot, d), r in heads.items():
            if r.valid_to is not None and r.valid_to <= valid_at:
                continue
            if r.expires_at is not None and r.expires_at <= valid_at:
                continue
            if slot not in best or depth(best[slot].scope) < d:
                best[slot] = r
        return list(best.values())

    def read(
        self,
        reader: ScopeT,
        kinds: Iterable[str],
        known_at: datetime,
        valid_at: datetime,
        *,
        subject: str | None = None,
        filters: dict[str, Any] | None = None,
    ) -> list[MRow]:
        """The visible set, then the caller's narrowing: subject and filters only keep or drop heads."""
        out = []
        for kind in kinds:
            for r in self.visible(reader, kind, known_at, valid_at):
                if subject is not None and r.subject != subject:
                    continue
                if filters and not all(_column(r, c) == v for c, v in filters.items()):
                    continue
                out.append(r)
        return out


def _column(row: MRow, column: str) -> Any:
    if column == "value":
        return f'"{row.value}"'  # values are stored as JSON
    return getattr(row, column)


def text_of(row: MRow) -> str:
    """A row's line text in a context block."""
    between = " prefers " if row.kind == "preference" else " "
    return f'{row.subject}{between}{row.attribute}: "{row.value}"'


# ---------------------------------------------------------------------------- the stores


class StoreFactory:
    """Hands out isolated namespaces of a shared store, so examples do not pay a store's
    warm-up (tables, DuckDB, index partition) each time.

    Each lease is its own division of an org (no example writes at org level, so no
    example sees another's rows), on the shared simulated clock, starting a day after the
    previous lease. Every `ORG_EVERY` leases the org is new: its caches then meet every
    team and actor for the first time, as an agent meets new tenants and users (codes of
    scope values given out as they arrive broke that way once); in between, an org holds
    other examples' divisions, which a reader must never see. Tombstones cover the
    division only; generations are compared only inside a division, so they need no
    reset. A new store every `LEASES` leases keeps the store (and purge's byte scan) small.
    Stores take turns at who takes a write's rows into the read caches (`CATCH_UP`: the
    write, or the next read), so the oracle checks both.
    """

    LEASES = 25
    ORG_EVERY = 5
    CATCH_UP = ("write", "read")  # ml.open's catch_up=, store by store

    def __init__(self, **open_options: Any) -> None:
        self.open_options = open_options  # more of ml.open's options (a maintenance policy)
        self.store: ml.MemoryStore | None = None
        self.root: str | None = None
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.leases = 0
        self.stores = 0  # stores made so far, the current one included
        # MEMLAKE_MODEL_RECORD=file: the store's calls, saved at the first failed read (tests/_recording.py)
        record = os.environ.get("MEMLAKE_MODEL_RECORD")
        self.recording = Recording(record, self.clock) if record else None

    def clock(self) -> datetime:
        return self.now

    def store_options(self) -> dict[str, Any]:
        """`ml.open`'s options for every handle on the store (a recording replays with them)."""
        catch_up = self.CATCH_UP[self.stores % len(self.CATCH_UP)]
        return {"embedder": ml.HashingEmbedder(dim=32), "catch_up": catch_up, **self.open_options}

    def _open(self, *, create: bool) -> ml.MemoryStore:
        assert self.root is not None
        return ml.open(os.path.join(self.root, "store"), clock=self.clock, create=create, **self.store_options())

    def lease(self) -> tuple[ml.MemoryStore, str, str, datetime]:
        if self.store is None or self.leases % self.LEASES == 0:
            self.close()
            self.root = tempfile.mkdtemp(prefix="memlake-model-")
            self.stores += 1
            self.store = self._open(create=True)
            if self.recording is not None:
                self.recording.restart(self.store_options())
        self.leases += 1
        self.now = (self.now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        store = self.store if self.recording is None else self.recording.wrap(self.store, "main")
        return store, f"acme{self.leases // self.ORG_EVERY}", f"d{self.leases}", self.now

    def fresh_handle(self) -> ml.MemoryStore:
        """Another handle on the current store: nothing remembered from earlier reads."""
        handle = self._open(create=False)
        return handle if self.recording is None else self.recording.wrap(handle)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


FACTORY = StoreFactory()


# ---------------------------------------------------------------------------- the machine


def _scope(scope: ScopeT) -> ml.Scope:
    return ml.Scope(*scope)


class MemoryMachine(RuleBasedStateMachine):
    """Random writes, proposals, retractions, forgets, purges and clock moves, with every
    read compared to the model as sets (ranking is not the model's business)."""

    factory = FACTORY
    MAX_PURGES = 1  # a purge rewrites files and scans every byte: the slowest step
    MAX_FORGETS = 2  # a forget appends to the ledger and re-reads it
    MAX_FRESH = 1  # opening another handle
    K = 500  # recall/context k: more than anything an example writes

    def __init__(self) -> None:
        super().__init__()
        self.store, org, d, self.t0 = self.factory.lease()
        self.scopes: dict[str, ScopeT] = {
            "root": (org, d, None, None),
            "tier2": (org, d, "tier2", None),
            "tier1": (org, d, "tier1", None),
            "alice": (org, d, "tier2", "alice"),
            "bob": (org, d, "tier1", "bob"),
            "dave": (org, d, "tier1", "dave"),  # bob's teammate: two actors of one team, one may arrive later
            "bot": (org, d, "tier2", "bot"),
            "carol": (org, d, "sales", "carol"),
            "other-org": ("globex", d, None, None),
        }
        s = self.scopes
        self.principals: dict[str, ml.Principal] = {
            "root-lead": ml.Principal("root-lead", _scope(s["root"]), role="curator"),
            "lead": ml.Principal("lead", _scope(s["tier2"]), role="curator"),
            "alice": ml.Principal("alice", _scope(s["alice"]), role="member"),
            "bob": ml.Principal("bob", _scope(s["bob"]), role="member"),
            "dave": ml.Principal("dave", _scope(s["dave"]), role="member"),
            "bot": ml.Principal("triage-bot", _scope(s["bot"]), role="agent"),
            "carol": ml.Principal("carol", _scope(s["carol"]), role="member"),
            "dpo": ml.Principal("dpo", _scope(s["root"]), role="steward"),
            "team-dpo": ml.Principal("team-dpo", _scope(s["tier2"]), role="steward"),
            "outsider": ml.Principal("outsider", _scope(s["other-org"]), role="member"),
        }
        # who writes where (always allowed), who proposes where
        self.writes = {
            "root-lead": ("root", "tier2", "tier1", "alice", "bob", "dave"),
            "lead": ("tier2", "alice", "bot"),
            "alice": ("alice",),
            "bob": ("bob",),
            "dave": ("dave",),
        }
        self.proposes = {"bot": ("bot", "tier2", "root"), "lead": ("tier2",)}
        self.model = Model()
        self.ids: list[str] = []  # every record id the store returned
        self.proposals: list[str] = []
        self.purges = self.forgets = self.fresh = 0
        self.last_read: tuple | None = None

    # --- helpers

    def now(self) -> datetime:
        return self.factory.now

    def day(self, n: float) -> datetime:
        return self.t0 + timedelta(days=n)

    def times(self) -> list[datetime]:
        """Instants worth reading at: every commit and forget, every boundary of valid time, and a step off."""
        out = {self.t0, self.now()}
        for r in self.model.rows:
            out.update(t for t in (r.known_since, r.valid_from, r.valid_to, r.expires_at) if t is not None)
        out.update(t.at for t in self.model.tombs)
        return sorted(out | {t + timedelta(seconds=d) for t in list(out) for d in (-1, 1)})

    def _record(self, data: st.DataObject, scope_name: str) -> MRecord:
        kind = data.draw(st.sampled_from(KINDS))
        vf = self.day(data.draw(st.integers(-5, 20)))
        vt = data.draw(st.one_of(st.none(), st.integers(1, 6).map(lambda n: vf + timedelta(days=n))))
        ttl = data.draw(st.sampled_from((2, 10, None))) if kind == "preference" else None
        return MRecord(
            kind,
            data.draw(st.sampled_from(SUBJECTS)),
            data.draw(st.sampled_from(ATTRIBUTES)),
            data.draw(st.sampled_from(VALUES)),
            data.draw(st.sampled_from(SOURCES)),
            self.scopes[scope_name],
            vf,
            vt,
            ttl,
        )

    def _repeat_or_new(self, data: st.DataObject, scope_name: str) -> MRecord:
        """Half the time restate or change a record already written (duplicates, supersession)."""
        written = [r for r in self.model.rows if r.status != "retracted" and r.scope == self.scopes[scope_name]]
        if len(written) > 0 and data.draw(st.booleans()):  # `written and ...` would type the draw as a list
            r = data.draw(st.sampled_from(written))
            ttl = None
            if r.kind == "preference" and r.expires_at is not None and r.expires_at - r.valid_from >= timedelta(days=1):
                ttl = (r.expires_at - r.valid_from).days
            rec = MRecord(r.kind, r.subject, r.attribute, r.value, r.source, r.scope, r.valid_from, r.valid_to, ttl)
            change = data.draw(st.sampled_from(("same", "value", "later", "source", "correction")))
            if change == "value":
                rec.value = data.draw(st.sampled_from(VALUES))
            elif change == "correction":  # another source says otherwise: Free Starter -> Enterprise Pro
                rec.value = data.draw(st.sampled_from([v for v in VALUES if v != r.value]))
                rec.source = data.draw(st.sampled_from([s for s in SOURCES if s != r.source]))
            elif change == "later":
                rec.valid_from = rec.valid_from + timedelta(days=data.draw(st.integers(0, 4)))
                rec.valid_to = None
            elif change == "source":
                rec.source = data.draw(st.sampled_from(SOURCES))
            return rec
        return self._record(data, scope_name)

    @staticmethod
    def _build(rec: MRecord) -> ml.Envelope:
        if rec.kind == "fact":
            return ml.Fact(
                rec.subject,
                rec.attribute,
                rec.value,
                rec.valid_from,
                source=rec.source,
                valid_to=rec.valid_to,
                scope=_scope(rec.scope),
            )
        ttl = timedelta(days=rec.ttl_days) if rec.ttl_days is not None else None
        return ml.Preference(
            rec.subject,
            rec.attribute,
            rec.value,
            rec.valid_from,
            source=rec.source,
            valid_to=rec.valid_to,
            ttl=ttl,
            scope=_scope(rec.scope),
        )

    def _apply(self, planned: list[tuple[str, MRow | None]], results: Iterable[ml.WriteResult]) -> None:
        results = list(results)
        assert [a for a, _ in planned] == [r.action for r in results], (
            f"actions: model {[a for a, _ in planned]}, store {[r.action for r in results]}"
        )
        placeholders = {
            row.record_id: res.record_id for (_, row), res in zip(planned, results, strict=True) if row is not None
        }
        for (_, row), res in zip(planned, results, strict=True):
            if row is not None:
                row.record_id = res.record_id
                row.supersedes = placeholders.get(row.supersedes or "", row.supersedes)
                assert res.known_since is not None and res.known_since == self.now(), (res.known_since, self.now())
                row.known_since = res.known_since
                assert res.supersedes == row.supersedes, (res.supersedes, row.supersedes)
                self.model.rows.append(row)
                self.ids.append(res.record_id)

    def _expect_error(self, error: type[BaseException], call: Any) -> None:
        rows = len(self.model.rows)
        try:
            call()
        except error:
            assert len(self.model.rows) == rows
            return
        raise AssertionError(f"the store did not raise {error.__name__}")

    # --- writes

    @rule(data=st.data(), writer=st.sampled_from(("root-lead", "lead", "alice", "bob", "dave")))
    def write(self, data: st.DataObject, writer: str) -> None:
        rec = self._repeat_or_new(data, data.draw(st.sampled_from(self.writes[writer])))
        planned = self.model.plan([rec], "active")

        def call() -> ml.WriteResult:
            return self.store.write(self._build(rec), by=self.principals[writer])

        if planned[0][0] == "forgotten":
            self._expect_error(ml.StaleGeneration, call)
            return
        self._apply(planned, [call()])

    @rule(data=st.data())
    def write_many(self, data: st.DataObject) -> None:
        writer = "root-lead"
        n = data.draw(st.integers(1, 4))
        recs = [self._repeat_or_new(data, data.draw(st.sampled_from(self.writes[writer]))) for _ in range(n)]
        planned = self.model.plan(recs, "active")
        result = self.store.write_many([self._build(r) for r in recs], by=self.principals[writer])
        self._apply(planned, result)
        assert result.count("forgotten") == sum(1 for a, _ in planned if a == "forgotten")

    @rule(data=st.data(), proposer=st.sampled_from(("bot", "bot", "lead")))
    def propose(self, data: st.DataObject, proposer: str) -> None:
        rec = self._record(data, data.draw(st.sampled_from(self.proposes[proposer])))
        rec.valid_to = None
        planned = self.model.plan([rec], "proposed")

        def call() -> ml.WriteResult:
            return self.store.propose(self._build(rec), by=self.principals[proposer])

        if planned[0][0] == "forgotten":
            self._expect_error(ml.StaleGeneration, call)
            return
        self._apply(planned, [call()])
        row = planned[0][1]
        assert row is not None
        row.proposer = self.principals[proposer].id
        self.proposals.append(row.record_id)

    @precondition(lambda self: self.proposals)
    @rule(data=st.data(), approver=st.sampled_from(("root-lead", "lead")))
    def approve(self, data: st.DataObject, approver: str) -> None:
        pid = data.draw(st.sampled_from(self.proposals))
        correction: dict[str, Any] = data.draw(st.sampled_from(({}, {"value": "C"}, {"valid_from": self.day(-4)})))
        by = self.principals[approver]

        def call() -> ml.WriteResult:
            return self.store.approve(pid, by=by, **correction)

        row = self.model.find(pid)
        if row is None or row.status != "proposed":
            return self._expect_error(ml.ValidationError, call)
        if (
            not contains(self.scopes["root" if approver == "root-lead" else "tier2"], row.scope)
            or row.proposer == by.id
        ):
            return self._expect_error(ml.PermissionDenied, call)
        rec = MRecord(
            row.kind,
            row.subject,
            row.attribute,
            correction.get("value", row.value),
            row.source,
            row.scope,
            correction.get("valid_from", row.valid_from),
            row.valid_to,
        )
        planned = self.model.plan([rec], "active", supersedes=pid, expires=[row.expires_at])
        if planned[0][0] == "forgotten":
            return self._expect_error(ml.StaleGeneration, call)
        self._apply(planned, [call()])

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), retractor=st.sampled_from(("root-lead", "alice")))
    def retract(self, data: st.DataObject, retractor: str) -> None:
        rid = data.draw(st.sampled_from(self.ids))

        def call() -> ml.WriteResult:
            return self.store.retract(rid, by=self.principals[retractor], reason="wrong")

        row = self.model.find(rid)
        if row is None or row.status != "active":
            return self._expect_error(ml.ValidationError, call)
        if retractor == "alice" and row.scope != self.scopes["alice"]:
            return self._expect_error(ml.PermissionDenied, call)
        if self.model.erased(
            MRecord(row.kind, row.subject, row.attribute, row.value, row.source, row.scope, row.valid_from)
        ):
            return self._expect_error(ml.StaleGeneration, call)
        self.model.seq += 1
        marker = MRow(
            "",
            row.kind,
            row.subject,
            row.attribute,
            row.value,
            row.source,
            row.scope,
            row.valid_from,
            row.valid_to,
            row.expires_at,
            "retracted",
            row.known_since,
            self.model.seq,
            0,
            self.model.generation(row.subject),
            rid,
        )
        self._apply([("superseded", marker)], [call()])

    @precondition(lambda self: self.forgets < self.MAX_FORGETS)
    @rule(subject=st.sampled_from(SUBJECTS), steward=st.sampled_from(("dpo", "dpo", "team-dpo")))
    def forget(self, subject: str, steward: str) -> None:
        self.forgets += 1
        by = self.principals[steward]
        report = self.store.forget(subject, by=by, reason="erasure request")
        generation = self.model.generation(subject) + 1
        scope = self.scopes["root" if steward == "dpo" else "tier2"]
        self.model.tombs.append(MTomb(subject, generation, self.now(), scope[:3]))
        assert report.at == self.now()

    @precondition(lambda self: self.purges < self.MAX_PURGES)
    @rule()
    def purge(self) -> None:
        self.purges += 1
        report = self.store.purge(by=self.principals["dpo"])
        assert report.verified, report.leftovers
        root, now = self.scopes["root"], self.now()
        self.model.rows = [
            r
            for r in self.model.rows
            if not (
                contains(root, r.scope)
                and (
                    self.model.hidden(r)
                    or (
                        r.kind == "preference"
                        and r.status != "retracted"
                        and r.expires_at is not None
                        and r.expires_at <= now
                    )
                )
            )
        ]

    @rule(
        step=st.sampled_from(
            (timedelta(0), timedelta(hours=1), timedelta(days=1), timedelta(days=3), timedelta(days=10))
        )
    )
    def move_clock(self, step: timedelta) -> None:
        self.factory.now = self.factory.now + step

    # --- reads

    def _basis(self, data: st.DataObject) -> tuple[dict[str, datetime], datetime, datetime]:
        mode = data.draw(st.sampled_from(("now", "as_of", "known_at", "valid_at")))
        now = self.now()
        if mode == "now":
            return {}, now, now
        t = data.draw(st.sampled_from(self.times()))
        if mode == "as_of":
            return {"as_of": t}, t, t
        if mode == "known_at":
            return {"known_at": t}, t, now
        return {"valid_at": t}, now, t

    def _filters(self, data: st.DataObject) -> dict[str, Any] | None:
        """A filter on one column; often the value of a row already written (a superseded
        one included), since a filter that matches nothing proves little."""
        which = data.draw(st.sampled_from(("none", "none", "source", "value", "record_id", "attribute", "row")))
        if which == "none":
            return None
        if which == "row":
            if not self.model.rows:
                return None
            row = data.draw(st.sampled_from(self.model.rows))
            column = data.draw(st.sampled_from(("source", "value", "record_id")))
            return {column: _column(row, column)}
        if which == "source":
            return {"source": data.draw(st.sampled_from(SOURCES))}
        if which == "value":
            return {"value": f'"{data.draw(st.sampled_from(VALUES))}"'}
        if which == "attribute":
            return {"attribute": data.draw(st.sampled_from(ATTRIBUTES))}
        if not self.ids:
            return None
        return {"record_id": data.draw(st.sampled_from(self.ids))}

    @rule(
        data=st.data(),
        reader=st.sampled_from(("alice", "bob", "dave", "lead", "root-lead", "bot", "carol", "dpo", "outsider")),
    )
    def read(self, data: st.DataObject, reader: str) -> None:
        what = data.draw(st.sampled_from(("get_fact", "recall", "recall", "context", "replay")))
        basis, known_at, valid_at = self._basis(data)
        subject = data.draw(st.one_of(st.none(), st.sampled_from(SUBJECTS)))
        kinds = data.draw(st.sampled_from((None, ("fact",), ("preference",), ("fact", "preference"))))
        spec = (
            what,
            reader,
            basis,
            known_at,
            valid_at,
            subject,
            kinds,
            self._filters(data),
            data.draw(st.sampled_from(ATTRIBUTES)),
        )
        self.last_read = spec
        self.check_reads(self.store, spec)

    @rule(
        data=st.data(),
        writer=st.sampled_from(("root-lead", "lead", "alice", "bob", "dave")),
        reader=st.sampled_from(("alice", "bob", "dave", "lead", "carol")),
        what=st.sampled_from(("get_fact", "recall")),
    )
    def write_then_read_now(self, data: st.DataObject, writer: str, reader: str, what: str) -> None:
        """An agent's turn: a read at now by someone of the org, a write, and the read again
        at once (the store serves it from the org's slot heads at now, which the first read
        left, advanced by the written rows)."""
        now = self.now()
        subject = data.draw(st.one_of(st.none(), st.sampled_from(SUBJECTS)))
        spec: tuple[Any, ...] = (
            what,
            reader,
            {},
            now,
            now,
            subject,
            ("fact",),
            None,
            data.draw(st.sampled_from(ATTRIBUTES)),
        )
        self.check_reads(self.store, spec)
        self.write(data, writer)
        self.last_read = spec
        self.check_reads(self.store, spec)

    @precondition(lambda self: self.last_read is not None)
    @rule()
    def read_again(self) -> None:
        """The last read once more: answered from whatever the store remembered."""
        assert self.last_read is not None
        self.check_reads(self.store, self.last_read)

    @precondition(lambda self: self.last_read is not None and self.fresh < self.MAX_FRESH)
    @rule()
    def fresh_reads(self) -> None:
        """The last read through a new handle (no cache): it must agree with the model too."""
        assert self.last_read is not None
        self.fresh += 1
        fresh = self.factory.fresh_handle()
        try:
            self.check_reads(fresh, self.last_read)
        finally:
            fresh.close()

    def check_reads(self, store: ml.MemoryStore, spec: tuple) -> None:
        """Run one read on *store* and compare it with the model's answer (a failure saves
        the recorded calls, if recording: tests/_recording.py)."""
        try:
            self._check_reads(store, spec)
        except AssertionError:
            if self.factory.recording is not None:
                self.factory.recording.save()
            raise

    def _check_reads(self, store: ml.MemoryStore, spec: tuple) -> None:
        what, reader, basis, _, _, subject, kinds, filters, attribute = spec
        # a clock the read leaves out is "now": now when it runs (read_again runs later)
        now = self.now()
        known_at = basis.get("as_of") or basis.get("known_at") or now
        valid_at = basis.get("as_of") or basis.get("valid_at") or now
        by = self.principals[reader]
        scope = self.scopes[
            {"root-lead": "root", "lead": "tier2", "dpo": "root", "outsider": "other-org"}.get(reader, reader)
        ]
        model_kinds = kinds or KINDS
        if what == "get_fact":
            kind = (kinds or ("fact",))[0]
            expected = [
                r.record_id
                for r in self.model.read(
                    scope, [kind], known_at, valid_at, subject=subject or "user:1", filters={"attribute": attribute}
                )
            ]
            got_fact = store.get_fact(subject or "user:1", attribute, by=by, kind=kind, **basis)
            assert ([got_fact.record_id] if got_fact else []) == expected, (spec, got_fact, expected)
            return
        rows = self.model.read(scope, model_kinds, known_at, valid_at, subject=subject, filters=filters)
        if what == "recall":
            hits = store.recall(
                "what plan and seats", by=by, subject=subject, kinds=kinds, k=self.K, filters=filters, **basis
            )
            got_ids = [h.record.record_id for h in hits]
            assert len(got_ids) == len(set(got_ids)), f"duplicate hits {got_ids}"
            assert set(got_ids) == {r.record_id for r in rows}, self._diff(spec, {str(i) for i in got_ids}, rows)
        elif what == "context":
            text = store.context(
                "what plan and seats",
                by=by,
                subject=subject,
                kinds=kinds,
                k=self.K,
                budget_tokens=100_000,
                **({"filters": filters} if filters else {}),
                **basis,
            )
            lines = [line[2:].split(" [")[0] for line in text.splitlines()[1:]]
            assert sorted(lines) == sorted(text_of(r) for r in rows), (spec, lines, [text_of(r) for r in rows])
        else:  # replay: decisions at their own time (both clocks); filters do not apply
            at = known_at if "as_of" in basis or "known_at" in basis else valid_at
            others = [
                (f"x{i}", self.principals[p], "plan", s, at)
                for i, (p, s) in enumerate((("alice", None), ("bob", "user:1"), ("lead", "alice")))
            ]
            decisions = [("d0", by, "plan", subject, at)] + others
            seen = store.replay(decisions, kinds=list(model_kinds)).visible
            got = set(zip(seen.column("decision_id").to_pylist(), seen.column("record_id").to_pylist(), strict=True))
            expected_pairs: set[tuple[str, str]] = set()
            for did, p, _, s, t in decisions:
                p_scope = next(v for k, v in self.scopes.items() if _scope(v) == p.scope)
                expected_pairs |= {(did, r.record_id) for r in self.model.read(p_scope, model_kinds, t, t, subject=s)}
            assert got == expected_pairs, (spec, sorted(got - expected_pairs), sorted(expected_pairs - got))

    def _diff(self, spec: tuple, got: set[str], rows: list[MRow]) -> str:
        want = {r.record_id for r in rows}
        by_id = {r.record_id: r for r in self.model.rows}
        return (
            f"{spec}\n  store only: {[by_id.get(i, i) for i in sorted(got - want)]}"
            f"\n  model only: {[by_id.get(i, i) for i in sorted(want - got)]}"
        )

    @invariant()
    def clock_is_the_commit_clock(self) -> None:
        assert self.store.clock.peek() == self.now()

    def teardown(self) -> None:
        pass  # the shared store lives on; FACTORY.close() at the end of the session


# silence "unused" for helpers subclasses may want
__all__ = ["MemoryMachine", "Model", "MRow", "MRecord", "MTomb", "FACTORY", "StoreFactory", "initialize"]
