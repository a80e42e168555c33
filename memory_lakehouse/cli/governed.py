"""`memlake propose | approve | retract`: the governed write workflow, one library call each."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import errors
from ..records import from_dict
from .app import _common, _emit, _open, _principal


def _one_record(text: str) -> Any:
    try:
        return from_dict(json.loads(text))
    except json.JSONDecodeError as exc:
        raise errors.ValidationError(f"the record is not JSON ({exc.msg})", field="record") from exc


def _result(res: Any) -> dict[str, Any]:
    return {
        "record_id": res.record_id,
        "action": res.action,
        "kind": res.kind,
        "supersedes": res.supersedes,
        "redacted": list(res.redacted),
    }


def cmd_propose(args: argparse.Namespace) -> None:
    record = _one_record(args.record)
    store = _open(args)
    res = store.propose(record, by=_principal(args), reason=args.reason)
    _emit(
        args,
        _result(res),
        lambda: [f"proposed {res.kind} {res.record_id}: a curator approves it with `memlake approve {res.record_id}`"],
    )


def cmd_approve(args: argparse.Namespace) -> None:
    corrections = json.loads(args.corrections) if args.corrections else {}
    if not isinstance(corrections, dict):
        raise errors.ValidationError("--corrections must be a JSON object", field="corrections")
    store = _open(args)
    res = store.approve(args.record_id, by=_principal(args), reason=args.reason, **corrections)
    _emit(args, _result(res), lambda: [f"approved {args.record_id}: active as {res.record_id} ({res.action})"])


def cmd_retract(args: argparse.Namespace) -> None:
    store = _open(args)
    res = store.retract(args.record_id, by=_principal(args), reason=args.reason)
    _emit(
        args,
        _result(res),
        lambda: [f"retracted {args.record_id}: hidden from every later read (history and audit keep it)"],
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "propose",
        help="propose one record (JSON) for a curator to approve; agents write this way",
        description="Record a draft with status 'proposed': never recalled until approved.",
    )
    _common(p)
    p.add_argument(
        "record",
        help='one record as JSON, e.g. \'{"kind": "fact", "subject": "u:1", ...}\' (fields: `memlake schema KIND`)',
    )
    p.add_argument("--reason", help="why (kept in the commit log)")
    p.set_defaults(fn=cmd_propose)

    p = sub.add_parser(
        "approve",
        help="approve a proposal (curator; never one's own)",
        description="Promote a proposal to active memory, optionally with corrections.",
    )
    _common(p)
    p.add_argument("record_id", help="the proposal's record id (see `memlake pending`)")
    p.add_argument("--corrections", help='JSON object of fields to change, e.g. \'{"value": "Pro"}\'')
    p.add_argument("--reason", help="why (default: 'approved proposal ID')")
    p.set_defaults(fn=cmd_approve)

    p = sub.add_parser(
        "retract",
        help="retract an active record (a new row hides it from later reads)",
        description="End a record: later reads never serve it; history and audit keep it.",
    )
    _common(p)
    p.add_argument("record_id", help="the record id to retract")
    p.add_argument("--reason", required=True, help="why it is wrong (required; kept in the commit log)")
    p.set_defaults(fn=cmd_retract)
