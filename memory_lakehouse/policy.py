"""The policy resolver: which rule applies to a case, and why — never whether to act.

Pure logic over ``Policy`` records the store has already made visible (the principal's
scope, approved and active, known at ``known_at``); a record that is not active, or was
recorded after ``known_at``, is still listed but never decides. Nothing here reads the store.

Terms (from the policy-memory spec):

* **effective** — ``effective_from <= at < effective_to`` (half-open; ``None`` = open);
* **matching** — every condition equals the fact of the same name (see :func:`matches`);
* **applicable** — effective, matching, and the winner of the precedence rules.

Precedence, applied in this order until one candidate is left:

0. *overrides* — a candidate whose ``policy_id`` another applicable candidate lists in
   its ``overrides`` loses;
1. *priority* — higher ``priority`` wins;
2. *specificity* — more matched condition fields win;
3. *scope* — the narrower scope (greater ``scope.depth``) wins.

A tie after all four raises :class:`~memory_lakehouse.errors.Escalation`: a person
decides, the resolver never guesses. Two versions of one ``policy_id`` that both cover
``at`` are not a tie: the later ``effective_from`` supersedes the earlier from its own
start (the store normally passes only that version).

The resolver decides which rule applies; it never grants an action. Authorization is a
separate check — the demo agent calls one before any refund or change. Retrieval finds
evidence, the resolver makes the policy decision, authorization controls the action.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from .errors import Escalation, ValidationError
from .records import Policy
from .scope import Scope
from .time import require_aware

__all__ = ["Candidate", "Decision", "matches", "effective_at", "resolve", "overlaps", "write_conflicts", "explain"]

RULES: tuple[str, ...] = ("only match", "overrides", "priority", "specificity", "scope")
_WHY = {
    "only match": "it was the only policy that both matched and was in effect",
    "overrides": "it is declared to override the competing policies",
    "priority": "it has the highest priority among the matching policies",
    "specificity": "it matched more condition fields than the others of equal priority",
    "scope": "it is set at a narrower scope than the others of equal priority and specificity",
}


@dataclass(frozen=True)
class Candidate:
    """One policy considered, and why it won or lost.

    ``status`` is ``"winner"``, ``"applicable"``, ``"lost: <rule> (...)"``,
    ``"not matching: ..."``, ``"not effective: ..."``, ``"not active: ..."``,
    ``"not known: ..."`` or, inside an :class:`Escalation`, ``"tied: ..."``.
    """

    policy: Policy
    matched: dict[str, Any]
    status: str

    @property
    def state(self) -> str:
        """The status without its detail: ``"lost"``, ``"not matching"``, ``"winner"`` …"""
        return self.status.split(":", 1)[0]


@dataclass(frozen=True)
class Decision:
    """Which policy version applies to a case, on which fields, since when, and why.

    ``policy`` is None when nothing applies (``rule == "no match"``). A decision is not
    an authorization: acting on it needs its own check.
    """

    policy: Policy | None
    matched: dict[str, Any]
    effective: tuple[datetime, datetime | None] | None
    rule: str
    candidates: tuple[Candidate, ...]
    explanation: str
    at: datetime
    known_at: datetime | None = None

    @property
    def losers(self) -> tuple[Candidate, ...]:
        """Every candidate except the winner, each with its reason in ``status``."""
        return tuple(c for c in self.candidates if c.state != "winner")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (what ``memlake policy --json`` prints)."""
        p = self.policy
        return {
            "policy_id": p.policy_id if p else None,
            "record_id": p.record_id if p else None,
            "text": p.text if p else None,
            "matched": {k: v if isinstance(v, (str, int, float, bool)) else _canon(v) for k, v in self.matched.items()},
            "effective": [_iso(t) for t in self.effective] if self.effective else None,
            "rule": self.rule,
            "at": _iso(self.at),
            "known_at": _iso(self.known_at),
            "candidates": [
                {"policy_id": c.policy.policy_id, "record_id": c.policy.record_id, "status": c.status}
                for c in self.candidates
            ],
            "explanation": self.explanation,
        }


# --------------------------------------------------------------------------- matching


def _canon(value: Any) -> str:
    """The form two values are compared in: exact and case-sensitive after rendering.

    Strings stay as they are; ``True``/``False``/``None`` render as JSON (``"true"``,
    ``"false"``, ``"null"``); numbers as their shortest form (``10``, ``10.0`` and
    ``"10"`` are one value); lists and dicts as sorted JSON.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def matches(policy: Policy, facts: Mapping[str, Any]) -> tuple[bool, dict[str, Any], str | None]:
    """Does every condition of *policy* equal the fact of the same name?

    Returns ``(ok, matched, reason)``: *matched* maps each condition field that matched to
    the fact's value (also when others did not); *reason* says why not, else None. A fact
    that is missing never matches; values compare exactly and case-sensitively after
    :func:`_canon` (so ``"US" != "us"`` but ``10 == "10"``). No conditions = matches all.

    >>> from datetime import datetime, timezone
    >>> p = Policy("us", "14 days", {"market": "US"}, datetime(2026, 1, 1, tzinfo=timezone.utc), source="doc")
    >>> matches(p, {"market": "US", "sale_type": "regular"})
    (True, {'market': 'US'}, None)
    >>> matches(p, {"market": "CA"})[2]
    "not matching: market is 'CA', needs 'US'"
    """
    matched: dict[str, Any] = {}
    misses: list[str] = []
    for key, wanted in dict(policy.conditions).items():
        if key not in facts:
            misses.append(f"{key} missing from the facts")
        elif _canon(facts[key]) == _canon(wanted):
            matched[key] = facts[key]
        else:
            misses.append(f"{key} is {facts[key]!r}, needs {wanted!r}")
    return (not misses, matched, None if not misses else "not matching: " + "; ".join(misses))


def effective_at(policy: Policy, at: datetime) -> bool:
    """``effective_from <= at < effective_to``: the new version owns its first instant."""
    at = require_aware(at, "at")
    return policy.effective_from <= at and (policy.effective_to is None or at < policy.effective_to)


# --------------------------------------------------------------------------- resolving


def resolve(
    policies: Sequence[Policy],
    facts: Mapping[str, Any],
    at: datetime,
    *,
    known_at: datetime | None = None,
) -> Decision:
    """Pick the one policy version that applies to *facts* at *at*, or escalate a tie.

    *facts* come from the system of record (the order), never from memory; *at* is the
    business time that governs (e.g. when the order was placed). Raises ``Escalation``
    (carrying the tied candidates) when the precedence rules cannot separate them.

    >>> from datetime import datetime, timezone
    >>> t = lambda *a: datetime(*a, tzinfo=timezone.utc)
    >>> old = Policy("returns", "30 days", {}, t(2026, 1, 1), effective_to=t(2026, 9, 1), source="doc")
    >>> new = Policy("returns", "14 days", {}, t(2026, 9, 1), source="doc")
    >>> resolve([old, new], {"market": "US"}, t(2026, 8, 31)).policy.text
    '30 days'
    """
    at = require_aware(at, "at")
    known_at = require_aware(known_at, "known_at", optional=True)
    if not isinstance(facts, Mapping):
        raise ValidationError(f"facts must be a mapping of field -> value, got {type(facts).__name__}", field="facts")
    status: dict[int, str] = {}
    matched: dict[int, dict[str, Any]] = {}
    live: list[int] = []  # indexes of candidates still in the running
    for i, p in enumerate(policies):
        if not isinstance(p, Policy):
            raise ValidationError(f"resolve() takes Policy records, got {type(p).__name__}", field="policies")
        ok, matched[i], reason = matches(p, facts)
        if p.status != "active":
            status[i] = f"not active: status is {p.status!r}"
        elif known_at is not None and p.known_since is not None and p.known_since > known_at:
            status[i] = f"not known: recorded {_fmt(p.known_since)}, after {_fmt(known_at)}"
        elif not effective_at(p, at):
            status[i] = f"not effective: in effect {_range((p.effective_from, p.effective_to))}"
        elif not ok:
            status[i] = reason or "not matching"
        else:
            live.append(i)

    # Versions of one policy_id: the one that started last supersedes the others.
    latest: dict[str, int] = {}
    for i in sorted(live, key=lambda i: _version_key(policies[i])):
        latest[policies[i].policy_id] = i
    for i in live:
        j = latest[policies[i].policy_id]
        if i != j:
            if _version_key(policies[i]) == _version_key(policies[j]):
                status[i] = status[j] = "tied: two versions of one policy_id with the same start"
                raise Escalation(
                    _tie_message([policies[i], policies[j]], facts, at), _cands(policies, matched, status, [i, j])
                )
            status[i] = f"lost: superseded by version {_vid(policies[j])} from {_fmt(policies[j].effective_from)}"
    live = [i for i in live if latest[policies[i].policy_id] == i]

    rule = "only match" if len(live) == 1 else "no match"
    if len(live) > 1:
        live, rule = _precedence(policies, matched, status, live, facts, at)
    for i in live:
        status[i] = "winner"
    candidates = _cands(policies, matched, status, range(len(policies)))
    win = policies[live[0]] if live else None
    decision = Decision(
        win,
        dict(matched[live[0]]) if live else {},
        (win.effective_from, win.effective_to) if win else None,
        rule,
        candidates,
        "",
        at,
        known_at,
    )
    return replace(decision, explanation=explain(decision))


def _precedence(
    policies: Sequence[Policy],
    matched: Mapping[int, Mapping[str, Any]],
    status: dict[int, str],
    live: list[int],
    facts: Mapping[str, Any],
    at: datetime,
) -> tuple[list[int], str]:
    """Apply overrides, priority, specificity and scope in turn; escalate a final tie."""
    pid = {i: policies[i].policy_id for i in live}
    overridden = {
        i: next(pid[j] for j in live if j != i and pid[i] in policies[j].overrides)
        for i in live
        if any(j != i and pid[i] in policies[j].overrides for j in live)
    }
    if len(overridden) == len(live):
        # Every candidate is overridden, so the declarations contain a cycle. The policies
        # on it tie; any other is overridden by one of them and simply loses.
        beats = {i: [j for j in live if j != i and pid[j] in policies[i].overrides] for i in live}
        tied = [i for i in live if _reaches(beats, i, i)]
        for i in live:
            status[i] = (
                f"tied: overridden by {overridden[i]} in a cycle of declared overrides"
                if i in tied
                else f"lost: overrides (overridden by {overridden[i]})"
            )
        raise Escalation(
            f"policies {_names(policies[i] for i in tied)} override each other in a cycle; a person must decide",
            _cands(policies, matched, status, tied),
        )
    for i, by in overridden.items():
        status[i] = f"lost: overrides (overridden by {by})"
    live = [i for i in live if i not in overridden]
    if len(live) == 1:
        return live, "overrides"
    keys: tuple[tuple[str, Callable[[int], int], str], ...] = (
        ("priority", lambda i: policies[i].priority, "priority {} < {} of {}"),
        ("specificity", lambda i: len(matched[i]), "{} matched field(s) < {} of {}"),
        ("scope", lambda i: _depth(policies[i]), "scope depth {} < {} of {}"),
    )
    for rule, key, detail in keys:
        best = max(key(i) for i in live)
        top = [i for i in live if key(i) == best]
        for i in live:
            if key(i) < best:
                status[i] = f"lost: {rule} ({detail.format(key(i), best, _names(policies[j] for j in top))})"
        live = top
        if len(live) == 1:
            return live, rule
    for i in live:
        status[i] = "tied: equal priority, specificity and scope"
    raise Escalation(_tie_message([policies[i] for i in live], facts, at), _cands(policies, matched, status, live))


def _reaches(edges: Mapping[int, Sequence[int]], start: int, goal: int) -> bool:
    """Is *goal* reachable from *start* in one or more steps along *edges*?"""
    seen: set[int] = set()
    todo = list(edges[start])
    while todo:
        i = todo.pop()
        if i == goal:
            return True
        if i not in seen:
            seen.add(i)
            todo.extend(edges[i])
    return False


def _tie_message(tied: Sequence[Policy], facts: Mapping[str, Any], at: datetime) -> str:
    # Name only the fields the policies test: the rest of the facts may identify a customer.
    p, fields = tied[0], sorted({k for q in tied for k in q.conditions})
    on = ", ".join(f"{k}={facts[k]!r}" for k in fields) or "any case"
    return (
        f"policies {_names(tied)} tie for {on} at {_fmt(at)}: priority {p.priority}, "
        f"{len(p.conditions)} matched field(s), scope depth {_depth(p)}. A person must decide; "
        "give one a higher priority or declare an overrides relationship"
    )


# --------------------------------------------------------------------------- write-time check


def overlaps(new: Policy, existing: Sequence[Policy]) -> list[Policy]:
    """Existing active policies that *new* would tie with, unless a relationship is declared.

    A conflict is an existing policy with status ``"active"``, the same scope, equal
    priority, another policy_id, an intersecting effective range, and conditions one case
    could satisfy together (every shared field has equal values; a field only one of them
    names does not separate them), where neither lists the other in ``overrides`` — or
    both do: two policies declaring that each overrides the other state no order at all.
    This holds even when specificity would decide at read time: the write path wants an
    intentional relationship (a priority gap or a one-way ``overrides``). A new version of
    the same policy_id is never an overlap. The store raises ``ValidationError`` naming
    the result (see :func:`write_conflicts` for how it finds the policies to compare).
    """
    out = []
    for old in existing:
        if (
            old.status == "active"
            and old.policy_id != new.policy_id
            and old.scope == new.scope
            and old.priority == new.priority
            and _ranges_meet(new, old)
            and all(_canon(v) == _canon(old.conditions[k]) for k, v in new.conditions.items() if k in old.conditions)
            and (old.policy_id in new.overrides) == (new.policy_id in old.overrides)
        ):
            out.append(old)
    return out


def write_conflicts(
    batch: Sequence[Policy],
    in_force: Callable[[Scope, datetime], Sequence[Policy]],
    starts: Iterable[datetime] = (),
) -> list[tuple[Policy, Policy, datetime]]:
    """The overlaps a batch of new policy versions would create, as ``(new, existing, at)``.

    *in_force(scope, at)* returns the stored policies in force at *at* on exactly *scope*,
    one version per policy_id (the store passes its visibility query); *starts* are the
    ``effective_from`` instants the store holds (a superset is fine). A version is in
    force from its own start until it ends or the next version starts, so checking each
    new policy at its start and at every other start inside its range finds every instant
    at which it could meet another policy — including one that starts after it does.

    The batch is laid over the store: its versions supersede stored ones from their start
    (a batch may end one policy and begin its successor), and its members are checked
    against each other. Each pair is reported once, at the first instant it meets.
    """
    starts = set(starts) | {p.effective_from for p in batch}
    cache: dict[tuple[Scope, datetime], dict[str, Policy]] = {}

    def heads(scope: Scope, at: datetime) -> dict[str, Policy]:
        if (scope, at) not in cache:
            found = {p.policy_id: p for p in in_force(scope, at)}
            latest: dict[str, Policy] = {}
            for b in batch:  # a later entry of the batch wins a tie on start
                if (
                    b.scope == scope
                    and b.effective_from <= at
                    and (b.policy_id not in latest or b.effective_from >= latest[b.policy_id].effective_from)
                ):
                    latest[b.policy_id] = b
            for pid, b in latest.items():
                stored = found.get(pid)
                if stored is None or b.effective_from >= stored.effective_from:
                    if effective_at(b, at):
                        found[pid] = b
                    else:
                        found.pop(pid, None)
            cache[(scope, at)] = found
        return cache[(scope, at)]

    out: list[tuple[Policy, Policy, datetime]] = []
    reported: set[tuple[Scope, frozenset[str]]] = set()
    for new in batch:
        if new.scope is None:  # the write path scopes every record before checking overlaps
            raise ValidationError(f"policy {new.policy_id} has no scope", field="scope")
        for at in sorted(t for t in starts if effective_at(new, t)):
            current = heads(new.scope, at)
            if current.get(new.policy_id) is not new:
                continue  # a later version in the same batch governs this instant
            for old in overlaps(new, [p for pid, p in current.items() if pid != new.policy_id]):
                key = (new.scope, frozenset((new.policy_id, old.policy_id)))
                if key not in reported:
                    reported.add(key)
                    out.append((new, old, at))
    return out


def _ranges_meet(a: Policy, b: Policy) -> bool:
    a_before_b_ends = b.effective_to is None or a.effective_from < b.effective_to
    b_before_a_ends = a.effective_to is None or b.effective_from < a.effective_to
    return a_before_b_ends and b_before_a_ends


# --------------------------------------------------------------------------- explanation


def explain(decision: Decision) -> str:
    """One paragraph a support agent can read: what applies, why, since when, over what."""
    basis = f"at {_fmt(decision.at)}"
    if decision.known_at is not None:
        basis += f", with the policies known by {_fmt(decision.known_at)}"
    caveat = (
        "This is a policy decision, not an authorization to act: a refund, return or change it "
        "implies still needs its own authorization check."
    )
    p = decision.policy
    if p is None:
        if not decision.candidates:
            return f"No policy applies {basis}: no policy was visible to consider. Escalate to a person. {caveat}"
        seen = "; ".join(f"{_name(c.policy)}: {c.status}" for c in decision.candidates)
        return (
            f"No policy applies {basis}. Considered {len(decision.candidates)}: {seen}. "
            f"Escalate to a person rather than guess. {caveat}"
        )
    cond = ", ".join(f"{k}={v!r}" for k, v in decision.matched.items()) or "no conditions (it covers every case)"
    scope = p.scope.path if p.scope is not None else "unscoped"
    text = (
        f"Policy {p.policy_id} (version {_vid(p)}, scope {scope}, priority {p.priority}) applies {basis}: "
        f'"{p.text}". It matched on {cond} and is in effect {_range(decision.effective)}. '
        f"It won by {decision.rule}: {_WHY.get(decision.rule, decision.rule)}."
    )
    if decision.losers:
        text += " Also considered: " + "; ".join(f"{_name(c.policy)} ({c.status})" for c in decision.losers) + "."
    return f"{text} {caveat}"


# --------------------------------------------------------------------------- helpers


def _cands(
    policies: Sequence[Policy], matched: Mapping[int, Mapping[str, Any]], status: Mapping[int, str], idx: Iterable[int]
) -> tuple[Candidate, ...]:
    return tuple(Candidate(policies[i], dict(matched[i]), status.get(i, "applicable")) for i in idx)


def _version_key(p: Policy) -> tuple[datetime, datetime]:
    return p.effective_from, p.known_since or datetime.min.replace(tzinfo=UTC)


def _depth(p: Policy) -> int:
    return p.scope.depth if p.scope is not None else 0


def _vid(p: Policy) -> str:
    return p.record_id or f"from {_fmt(p.effective_from)}"


def _name(p: Policy) -> str:
    return f"{p.policy_id}@{p.record_id}" if p.record_id else p.policy_id


def _names(ps: Iterable[Policy]) -> str:
    return ", ".join(_name(p) for p in ps)


def _fmt(t: datetime | None) -> str:
    return "open" if t is None else t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(UTC).isoformat()


def _range(eff: tuple[datetime, datetime | None] | None) -> str:
    if eff is None:
        return "never"
    start, end = eff
    return f"from {_fmt(start)} " + ("with no end date" if end is None else f"until {_fmt(end)} (exclusive)")
