"""`memlake maintenance`: status, compact, checkpoint, vacuum (a dry run unless --yes), run."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from .app import _common, _emit, _open


def cmd_maintenance(args: argparse.Namespace) -> None:
    store = _open(args)
    m, kinds = store.maintenance, args.kind or None
    report: Any
    if args.action == "status":
        report = m.status()
    elif args.action == "compact":
        report = m.compact(kinds=kinds)
    elif args.action == "checkpoint":
        report = m.checkpoint(kinds=kinds)
    elif args.action == "vacuum":
        report = m.vacuum(retain=timedelta(hours=args.retain_hours), dry_run=not args.yes, kinds=kinds)
    else:
        compacted, checkpointed = m.run(kinds=kinds)
        _emit(
            args,
            {"compact": compacted.to_dict(), "checkpoint": checkpointed.to_dict()},
            lambda: compacted.summary() + checkpointed.summary(),
        )
        return
    _emit(args, report.to_dict(), report.summary)


def register(sub: Any) -> None:
    p = sub.add_parser("maintenance", help="compact, checkpoint, vacuum (dry run unless --yes), status")
    _common(p, principal=False)
    p.add_argument(
        "action",
        choices=("status", "compact", "checkpoint", "vacuum", "run"),
        help="run = compact, then record commits and checkpoint (what the policy does)",
    )
    p.add_argument("--kind", action="append", help="restrict to a table (repeatable)")
    p.add_argument("--retain-hours", type=float, default=168.0, help="vacuum: keep files removed this recently")
    p.add_argument("--yes", action="store_true", help="vacuum: really delete")
    p.set_defaults(fn=cmd_maintenance)
