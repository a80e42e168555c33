"""Scopes (org → division → team → actor), principals and what their roles allow.

Visibility rule, in one place: a principal reads its own scope and its ancestors',
never a sibling's or a descendant's. Writes go to the principal's own scope; curators
and stewards may write anywhere inside their subtree; agents only propose, at their
scope or an ancestor's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from .errors import PermissionDenied, ValidationError

Role = Literal["agent", "member", "curator", "steward"]
ROLES: tuple[str, ...] = ("agent", "member", "curator", "steward")
LEVELS: tuple[str, ...] = ("org", "division", "team", "actor")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


@dataclass(frozen=True, order=True)
class Scope:
    """A node of the scope tree; lower levels are None for broader scopes.

    >>> Scope("acme", "support", "tier2").depth
    3
    >>> Scope("acme").contains(Scope("acme", "support"))
    True
    """

    org: str
    division: str | None = None
    team: str | None = None
    actor: str | None = None

    def __hash__(self) -> int:  # scopes key the write path's per-batch maps: hash once
        try:
            cached: int = self.__dict__["_hash"]
            return cached
        except KeyError:
            self.__dict__["_hash"] = h = hash((self.org, self.division, self.team, self.actor))
            return h

    def __getstate__(self) -> dict[str, Any]:  # a string's hash differs between processes: never pickle it
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __post_init__(self) -> None:
        seen_gap = False
        for level in LEVELS:
            value = getattr(self, level)
            if value is None:
                seen_gap = True
                continue
            if seen_gap:
                raise ValidationError(
                    f"scope.{level} is set but a broader level above it is not: {self.path}",
                    field=f"scope.{level}",
                )
            if not isinstance(value, str) or not _NAME.match(value):
                raise ValidationError(
                    f"scope.{level} must be a short name of letters, digits and _.:@- (got {value!r})",
                    field=f"scope.{level}",
                )

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.org, self.division, self.team, self.actor) if p is not None)

    @property
    def depth(self) -> int:
        return len(self.parts)

    @property
    def path(self) -> str:
        return "/".join(str(p) for p in (self.org, self.division, self.team, self.actor) if p is not None)

    def __str__(self) -> str:
        return self.path

    @classmethod
    def parse(cls, path: str) -> Scope:
        """``"acme/support/tier2"`` → ``Scope("acme", "support", "tier2")``."""
        parts = [p for p in str(path).strip("/").split("/") if p]
        if not 1 <= len(parts) <= 4:
            raise ValidationError(f"scope path {path!r} needs 1 to 4 parts (org/division/team/actor)", field="scope")
        return cls(*parts)

    def ancestors(self) -> list[Scope]:
        """This scope and every broader one, broadest first."""
        parts = self.parts
        return [Scope(*parts[: i + 1]) for i in range(len(parts))]

    def contains(self, other: Scope) -> bool:
        """True when *other* is this scope or inside its subtree."""
        return other.parts[: self.depth] == self.parts


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


@dataclass(frozen=True)
class Principal:
    """Who is acting: an id, the scope it lives at, and a role.

    >>> Principal("alice", Scope("acme", "support", "tier2", "alice"), role="member").can_write_directly
    True
    """

    id: str
    scope: Scope
    role: Role = "member"

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValidationError("principal id must be a non-empty string", field="principal.id")
        if not isinstance(self.scope, Scope):
            raise ValidationError("principal scope must be a Scope", field="principal.scope")
        if self.role not in ROLES:
            raise ValidationError(f"role must be one of {', '.join(ROLES)} (got {self.role!r})", field="principal.role")

    @property
    def rank(self) -> int:
        return ROLES.index(self.role)

    @property
    def can_write_directly(self) -> bool:
        return self.rank >= ROLES.index("member")

    def can_read(self, scope: Scope) -> bool:
        """The visibility rule: own scope and ancestors only."""
        return scope.contains(self.scope)

    # --- write rules -------------------------------------------------------------

    def check_write(self, scope: Scope) -> None:
        """Raise PermissionDenied unless this principal may write active memory at *scope*."""
        if self.role == "agent":
            raise PermissionDenied(f"{self.id} is an agent: agents write only through propose(), a curator approves")
        if scope == self.scope:
            return
        if self.rank >= ROLES.index("curator") and self.scope.contains(scope):
            return
        who = "a member writes only at its own scope" if self.role == "member" else "only inside its subtree"
        raise PermissionDenied(f"{self.id} ({self.role} at {self.scope}) may not write at {scope}: {who}")

    def check_propose(self, scope: Scope) -> None:
        """Anyone may propose at its own scope or an ancestor's (or, if it may write there, anywhere it writes)."""
        if self.can_read(scope):
            return
        if self.rank >= ROLES.index("curator") and self.scope.contains(scope):
            return
        raise PermissionDenied(f"{self.id} may not propose at {scope}: only at {self.scope} or an ancestor of it")

    def check_curate(self, scope: Scope, action: str = "approve") -> None:
        if self.rank < ROLES.index("curator"):
            raise PermissionDenied(f"{self.id} is {_a(self.role)}: only a curator or steward may {action}")
        if not self.scope.contains(scope):
            raise PermissionDenied(f"{self.id} may {action} only inside {self.scope}, not at {scope}")

    def check_steward(self, scope: Scope, action: str) -> None:
        if self.role != "steward":
            raise PermissionDenied(f"{self.id} is {_a(self.role)}: only a steward may {action}")
        if not self.scope.contains(scope):
            raise PermissionDenied(f"{self.id} may {action} only inside {self.scope}, not at {scope}")
