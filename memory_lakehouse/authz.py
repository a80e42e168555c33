"""Action authorization: a policy decision is not a permission to act.

Retrieval finds evidence, the resolver (`store.resolve_policy`) decides which policy
applies, and this module decides whether *this principal* may take *this action* now.
The demo agent calls `authorize` before any refund; it raises ``PermissionDenied``
unless every rule holds, and reads nothing from memory — a recalled support case in
which someone once approved a refund grants nothing.

Rules for ``"refund"`` (the only action so far; any other action is refused):

1. the decision names a policy — no match means a person decides;
2. that policy allows a return and the request is inside its window;
3. the principal's role has a refund limit and the amount is within it.

Policy records carry no structured terms yet, so rule 2 reads the approved text with
one strict pattern and fails closed: ``"… within N days …"`` is a window of N days,
``"cannot be returned"`` / ``"no returns"`` / ``"non-returnable"`` forbid returns, and
anything else (two windows, no window) is refused as unreadable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import PermissionDenied, ValidationError
from .policy import Decision
from .records import Policy
from .scope import Principal

__all__ = ["Authorization", "authorize", "return_window"]

ACTIONS: tuple[str, ...] = ("refund",)

_FORBIDS = re.compile(
    r"\b(cannot|can ?not|may not|must not) be returned\b|\bno returns?\b|\bnon-?returnable\b", re.IGNORECASE
)
_WINDOW = re.compile(r"\bwithin (\d+) days?\b", re.IGNORECASE)


@dataclass(frozen=True)
class Authorization:
    """Proof that an action was allowed: who, what, how much, under which policy version."""

    action: str
    principal: str
    amount: float
    policy_id: str
    record_id: str | None
    reason: str


def return_window(policy: Policy) -> int:
    """The return window in days the policy grants; 0 when it forbids returns.

    Raises ``PermissionDenied`` when the text states no single window: unreadable terms
    never allow an action.

    >>> from datetime import datetime, timezone
    >>> p = Policy("us", "US orders can be returned within 14 days.", {}, datetime(2026, 9, 1, tzinfo=timezone.utc))
    >>> return_window(p)
    14
    """
    if _FORBIDS.search(policy.text):
        return 0
    windows = {int(n) for n in _WINDOW.findall(policy.text)}
    if len(windows) != 1:
        raise PermissionDenied(
            f"policy {policy.policy_id} states {'no' if not windows else 'more than one'} return window "
            f"({policy.text!r}); a person must decide"
        )
    return windows.pop()


def authorize(
    action: str,
    *,
    principal: Principal,
    decision: Decision,
    limits: Mapping[str, float],
    amount: float,
    elapsed_days: float,
) -> Authorization:
    """Allow *action* or raise ``PermissionDenied`` naming the rule that refused it.

    *decision* is the resolver's answer for this case; *limits* is the action service's
    own configuration, the largest refund each role may issue (a role not listed may
    not refund); *amount* and *elapsed_days* (days since delivery) come from the system
    of record, not from memory.

    >>> # grant = authorize("refund", principal=bot, decision=dec, limits={"agent": 50},
    >>> #                   amount=30, elapsed_days=10)
    """
    if not isinstance(principal, Principal):
        raise ValidationError("principal must be a Principal", field="principal")
    if not isinstance(decision, Decision):
        raise ValidationError(
            "authorize needs the resolver's Decision; memory (a past case, a note) grants no permission",
            field="decision",
        )
    for name, value in (("amount", amount), ("elapsed_days", elapsed_days)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValidationError(f"{name} must be a non-negative number", field=name)
    if action not in ACTIONS:
        raise PermissionDenied(f"no rule authorizes {action!r}; known actions: {', '.join(ACTIONS)}")

    policy = decision.policy
    if policy is None:
        raise PermissionDenied(f"no policy applies to this case ({decision.rule}); a person must decide")
    window = return_window(policy)
    if window == 0:
        raise PermissionDenied(f"policy {policy.policy_id} does not allow returns: {policy.text!r}")
    if elapsed_days > window:
        raise PermissionDenied(
            f"policy {policy.policy_id} allows returns within {window} days; this one is {elapsed_days:g} days in"
        )
    limit = limits.get(principal.role)
    if limit is None or limit <= 0:
        raise PermissionDenied(f"{principal.id} ({principal.role}) may not issue refunds")
    if amount > limit:
        raise PermissionDenied(f"{principal.id} ({principal.role}) may refund up to {limit:g}, not {amount:g}")
    return Authorization(
        action,
        principal.id,
        float(amount),
        policy.policy_id,
        policy.record_id,
        f"{policy.policy_id} allows returns within {window} days ({elapsed_days:g} elapsed); "
        f"{principal.role} limit {limit:g} covers {amount:g}",
    )
