"""`memlake context | get | list | history | pending | schema`: reading what is there."""

from __future__ import annotations

import argparse
from typing import Any

from ..records import KINDS, MEMORY_KINDS, to_dict
from .app import _basis_kwargs, _common, _emit, _open, _principal


def _when(value: Any) -> str:
    return value.isoformat() if value is not None else "…"


def cmd_context(args: argparse.Namespace) -> None:
    store = _open(args)
    ctx = store.context(
        args.query,
        by=_principal(args),
        budget_tokens=args.budget,
        subject=args.subject,
        kinds=args.kind or None,
        k=args.k,
        **_basis_kwargs(args),
    )
    _emit(args, ctx.to_dict(), lambda: ctx.text.splitlines() or ["(nothing visible)"])


def cmd_get(args: argparse.Namespace) -> None:
    store = _open(args)
    record = store.get(args.record_id, by=_principal(args), **_basis_kwargs(args))
    _emit(
        args,
        to_dict(record) if record else None,
        lambda: (
            [f"{k}: {v}" for k, v in to_dict(record).items() if v not in (None, "", [])]
            if record
            else [f"{args.record_id}: nothing visible at this basis"]
        ),
    )


def cmd_list(args: argparse.Namespace) -> None:
    store = _open(args)
    listing = store.list(args.subject, by=_principal(args), kinds=args.kind or None, **_basis_kwargs(args))
    _emit(
        args,
        [to_dict(r) for r in listing],
        lambda: (
            [
                f"{r.kind:<10} {r.record_id}  {row['text']}  (valid from {_when(row['valid_from'])}, source {r.source})"
                for r, row in zip(listing, listing.to_arrow().to_pylist(), strict=True)
            ]
            or [f"{args.subject}: nothing visible at this basis"]
        ),
    )


def cmd_history(args: argparse.Namespace) -> None:
    store = _open(args)
    hist = store.history(
        args.subject,
        args.attribute,
        by=_principal(args),
        kind=args.kind,
        lineage=args.lineage,
        known_at=_basis_kwargs(args)["known_at"],
    )
    _emit(
        args,
        [v.to_dict() for v in hist],
        lambda: (
            [
                f"{v.record_id}  {v.record.scope}  {getattr(v.record, 'value', '')!r}  valid {_when(v.valid_from)} .. "
                f"{_when(v.valid_to)}  known {_when(v.known_from)} .. {_when(v.known_to)}"
                + (f"  supersedes {v.supersedes}" if v.supersedes else "")
                + (f"  retracted: {v.retraction_reason}" if v.retracted else "")
                + (f"  reason: {v.reason}" if v.reason else "")
                for v in hist
            ]
            or ["(no versions visible)"]
        ),
    )


def cmd_pending(args: argparse.Namespace) -> None:
    store = _open(args)
    queue = store.pending(by=_principal(args), kinds=args.kind or None)
    _emit(
        args,
        [to_dict(r) for r in queue],
        lambda: (
            [
                f"{r.kind:<10} {r.record_id}  at {r.scope}  {row['text']}  (proposed {_when(r.known_since)})"
                for r, row in zip(queue, queue.to_arrow().to_pylist(), strict=True)
            ]
            or ["(no proposals pending)"]
        ),
    )


def cmd_schema(args: argparse.Namespace) -> None:
    from ..schema import kind_fields

    kinds = [args.kind] if args.kind else list(KINDS)
    payload = {k: kind_fields(k) for k in kinds}

    def lines() -> list[str]:
        out = []
        for kind, fields in payload.items():
            out.append(f'{kind}  ({{"kind": "{kind}", ...}})')
            for f in fields:
                need = "required" if f["required"] else f"default {f['default']!r}"
                out.append(f"  {f['name']:<14} {f['type']:<34} {need}")
        return out

    _emit(args, payload if args.kind is None else payload[args.kind], lines)


def _kind_option(p: argparse.ArgumentParser, kinds: tuple[str, ...] = MEMORY_KINDS) -> None:
    p.add_argument(
        "--kind", action="append", choices=KINDS, help=f"restrict to a kind (repeatable; default: {', '.join(kinds)})"
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "context",
        help="the prompt block for a query, with each item's provenance",
        description="What store.context() hands a model: text, and with --json the items.",
    )
    _common(p, basis=True)
    p.add_argument("query", help="what the agent is about to answer")
    p.add_argument("--subject", help="only memories about this subject")
    p.add_argument("--budget", type=int, default=800, help="token budget of the block")
    p.add_argument("-k", type=int, default=20, help="how many memories to rank before packing")
    _kind_option(p)
    p.set_defaults(fn=cmd_context)

    p = sub.add_parser(
        "get",
        help="one record by id, if you may see it (any version)",
        description="A record by id: superseded and retracted versions too, within your scope.",
    )
    _common(p, basis=True)
    p.add_argument("record_id", help="a record id (fac_…, pre_…, epi_…, ref_…, pol_…, not_…)")
    p.set_defaults(fn=cmd_get)

    p = sub.add_parser(
        "list",
        help="a subject's current memories (what reads would serve)",
        description="Every memory about a subject you would be served at the basis.",
    )
    _common(p, basis=True)
    p.add_argument("subject", help="the subject, e.g. user:42")
    _kind_option(p)
    p.set_defaults(fn=cmd_list)

    p = sub.add_parser(
        "history",
        help="every version of a slot: valid and known intervals, pointers, reasons",
        description="A slot's versions you may see, as known at --known-at (default now).",
    )
    _common(p, basis=True)
    p.add_argument("subject", nargs="?", help="the subject (with attribute), e.g. user:42")
    p.add_argument("attribute", nargs="?", help="the attribute, e.g. plan")
    p.add_argument("--kind", default="fact", choices=KINDS, help="the slot's kind")
    p.add_argument("--lineage", help="a lineage id instead of subject + attribute (any kind)")
    p.set_defaults(fn=cmd_history)

    p = sub.add_parser(
        "pending",
        help="proposals awaiting approval in your subtree (curator)",
        description="Proposals no approval points at yet, inside the curator's subtree.",
    )
    _common(p)
    _kind_option(p, KINDS)
    p.set_defaults(fn=cmd_pending)

    p = sub.add_parser(
        "schema",
        help="each record kind's JSON fields: required, optional, types, defaults",
        description="The JSON `memlake write` and `propose` accept, from the record dataclasses.",
    )
    p.add_argument("kind", nargs="?", choices=KINDS, help="one kind (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_schema)
