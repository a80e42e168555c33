"""`memlake export`: a snapshot of what a principal is served at a basis, one Parquet file per kind."""

from __future__ import annotations

import argparse
from typing import Any

from .app import _basis_kwargs, _common, _emit, _open, _principal


def cmd_export(args: argparse.Namespace) -> None:
    store = _open(args)
    report = store.export(
        args.out, by=_principal(args), kinds=args.kind or None, format=args.format, **_basis_kwargs(args)
    )
    _emit(args, report.to_dict(), report.summary)


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="write what a principal is served at a basis as Parquet (one file per kind)")
    _common(p, basis=True)
    p.add_argument("--out", required=True, help="directory to write <kind>.parquet into")
    p.add_argument("--format", default="parquet", choices=("parquet",), help="file format of the snapshot")
    p.add_argument("--kind", action="append", help="restrict to a kind (repeatable)")
    p.set_defaults(fn=cmd_export)
