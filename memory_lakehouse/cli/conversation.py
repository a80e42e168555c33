"""`memlake load` and `memlake capture`: conversations into the store (one library call each)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import errors
from .app import _common, _emit, _open, _principal


def cmd_load(args: argparse.Namespace) -> None:
    store = _open(args, create=True)
    report = store.load(args.path, format=args.format, by=_principal(args))
    _emit(args, report.to_dict(), lambda: [report.summary()])


def cmd_capture(args: argparse.Namespace) -> None:
    """Messages as JSON lines (``{"role": "user", "text": "...", "speaker": "..."}``) on stdin or --file."""
    messages: list[Any] = []
    with open(args.file, encoding="utf-8") if args.file != "-" else sys.stdin as stream:
        for n, line in enumerate(stream, 1):
            if line.strip():
                try:
                    messages.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise errors.ValidationError(f"line {n}: not JSON ({exc.msg})", field="messages") from exc
    store = _open(args, create=True)
    job = store.capture(args.session, messages, by=_principal(args), subject=args.subject)
    result = job.result()
    _emit(
        args,
        {
            "turns": [r.record_id for r in job.turns],
            "status": result.status,
            "sightings": result.sightings,
            "extracted": [
                {"record_id": r.record_id, "kind": r.kind, "action": r.action, "supersedes": r.supersedes}
                for r in result.results
            ],
        },
        lambda: (
            [
                f"stored {len(job.turns)} turn(s) of session {args.session}; extraction {result.status}: "
                f"{len(result.results)} record(s), {result.sightings} sighting(s)"
            ]
            + [f"{r.action:<10} {r.kind:<10} {r.record_id}" for r in result.results]
        ),
    )


def register(sub: Any) -> None:
    p = sub.add_parser("load", help="load LongMemEval or LoCoMo JSON as turns, each session at its date")
    _common(p)
    p.add_argument("path", nargs="+", help="JSON file(s) or a directory of them")
    p.add_argument("--format", required=True, choices=("longmemeval", "locomo"), help="the file's dataset format")
    p.set_defaults(fn=cmd_load)
    p = sub.add_parser("capture", help="store a session's messages (JSON lines) and extract memory from them")
    _common(p)
    p.add_argument("session", help="the session id")
    p.add_argument("--file", default="-", help="JSON-lines messages ('-': stdin)")
    p.add_argument("--subject", help="whom the session is about (default: each turn's speaker)")
    p.set_defaults(fn=cmd_capture)
