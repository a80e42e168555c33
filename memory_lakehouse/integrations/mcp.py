"""An MCP server over stdio: desktop assistants and IDE agents reach the store as tools.

    memlake mcp --store data/store --as triage-bot --scope acme/support/tier2/bot --role agent

The principal is fixed when the server starts (flags, the environment, or a profile —
as for every `memlake` command); a client cannot act as anyone else. Tools:

============== ======================================================= ==============
tool            what it does                                            who may
============== ======================================================= ==============
recall          fuzzy recall with the basis (as_of, known_at, valid_at) anyone
context         the prompt block and its items' provenance              anyone
get_fact        one slot's value at the basis                           anyone
propose         a draft record (JSON as `memlake schema` describes)     anyone (agents: the only write)
approve         promote a proposal                                      curators, stewards
retract         end an active record, with a reason                     members and up, in scope
forget          tombstone a subject                                     stewards
resolve_policy  which policy governs a case                             anyone
============== ======================================================= ==============

Every tool is listed; the store refuses what the role may not do. A library error
becomes an MCP tool error whose text is the one-line message the CLI prints.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ..errors import LakehouseError
from ..records import from_dict, to_dict
from ..scope import Principal
from ..time import require_aware

__all__ = ["build_server", "serve"]


def _time(value: str | None, name: str) -> datetime | None:
    return require_aware(value, name, optional=True) if value else None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))


def build_server(store: Any, principal: Principal) -> MCPServer:
    """The MCP server for *store*, every tool acting as *principal*."""
    server: MCPServer = MCPServer(
        "memory-lakehouse",
        instructions=(
            f"Governed, bi-temporal memory. You act as {principal.id} ({principal.role} at {principal.scope}). "
            "Cite the record_id of what you use; write through propose unless you are a member or curator."
        ),
    )

    def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LakehouseError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        except (ValueError, TypeError) as exc:  # malformed arguments (JSON, kinds) the library did not type
            raise ToolError(f"ValidationError: {exc}") from exc

    @server.tool()
    def recall(
        query: str,
        subject: str | None = None,
        kinds: list[str] | None = None,
        k: int = 8,
        as_of: str | None = None,
        known_at: str | None = None,
        valid_at: str | None = None,
    ) -> list[dict[str, Any]]:
        """Recall memories for a query: hits with score, why, and the record (with its provenance)."""
        hits = call(
            lambda: store.recall(
                query,
                by=principal,
                subject=subject,
                kinds=kinds,
                k=k,
                as_of=_time(as_of, "as_of"),
                known_at=_time(known_at, "known_at"),
                valid_at=_time(valid_at, "valid_at"),
            )
        )
        return [
            _jsonable(
                {
                    "record_id": h.record_id,
                    "score": h.score,
                    "why": list(h.why),
                    "text": h.text,
                    "record": to_dict(h.record),
                }
            )
            for h in hits
        ]

    @server.tool()
    def context(
        query: str, budget_tokens: int = 800, subject: str | None = None, as_of: str | None = None
    ) -> dict[str, Any]:
        """The prompt block for a query and its items: record_id, kind, source, evidence, valid time."""
        ctx = call(
            lambda: store.context(
                query, by=principal, budget_tokens=budget_tokens, subject=subject, as_of=_time(as_of, "as_of")
            )
        )
        out: dict[str, Any] = _jsonable(ctx.to_dict())
        return out

    @server.tool()
    def get_fact(
        subject: str,
        attribute: str,
        kind: str = "fact",
        as_of: str | None = None,
        known_at: str | None = None,
        valid_at: str | None = None,
    ) -> dict[str, Any] | None:
        """One slot's value at the basis (default now), or null when nothing is visible."""
        record = call(
            lambda: store.get_fact(
                subject,
                attribute,
                by=principal,
                kind=kind,
                as_of=_time(as_of, "as_of"),
                known_at=_time(known_at, "known_at"),
                valid_at=_time(valid_at, "valid_at"),
            )
        )
        return _jsonable(to_dict(record)) if record is not None else None

    @server.tool()
    def propose(record: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        """Propose a record (a JSON object with "kind"; fields per `memlake schema`); a curator approves it."""
        res = call(lambda: store.propose(from_dict(record), by=principal, reason=reason))
        return {"record_id": res.record_id, "action": res.action, "kind": res.kind}

    @server.tool()
    def approve(record_id: str, reason: str | None = None, corrections: dict[str, Any] | None = None) -> dict[str, Any]:
        """Approve a proposal (curators; never one's own), optionally with corrections."""
        res = call(lambda: store.approve(record_id, by=principal, reason=reason, **(corrections or {})))
        return {"record_id": res.record_id, "action": res.action, "approved": record_id}

    @server.tool()
    def retract(record_id: str, reason: str) -> dict[str, Any]:
        """Retract an active record: later reads never serve it; history keeps it."""
        res = call(lambda: store.retract(record_id, by=principal, reason=reason))
        return {"record_id": res.record_id, "retracted": record_id}

    @server.tool()
    def forget(subject: str, reason: str) -> dict[str, Any]:
        """Forget a subject (stewards): hidden at once at every basis; `memlake purge` erases the bytes."""
        report = call(lambda: store.forget(subject, by=principal, reason=reason))
        return {"subject": subject, "generation": report.generation, "hidden": len(report.record_ids)}

    @server.tool()
    def resolve_policy(facts: dict[str, Any], at: str, known_at: str | None = None) -> dict[str, Any]:
        """Which approved policy governs a case at world time `at` (ISO datetime), as known at `known_at`."""
        decision = call(
            lambda: store.resolve_policy(facts, at=_time(at, "at"), by=principal, known_at=_time(known_at, "known_at"))
        )
        resolved: dict[str, Any] = _jsonable(decision.to_dict())
        return resolved

    return server


def serve(store: Any, principal: Principal) -> None:
    """Serve *store* over stdio until the client disconnects."""
    build_server(store, principal).run("stdio")
