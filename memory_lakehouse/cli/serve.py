"""`memlake mcp`: serve the store to MCP clients over stdio, as one principal fixed at start-up."""

from __future__ import annotations

import argparse
from typing import Any

from .. import errors
from ..progress import Progress
from .app import _common, _open, _principal


def cmd_mcp(args: argparse.Namespace) -> None:
    try:
        from ..integrations.mcp import serve
    except ModuleNotFoundError as exc:
        raise errors.StoreError("`memlake mcp` needs the MCP SDK: pip install 'memory-lakehouse[mcp]'") from exc
    principal = _principal(args)
    with Progress.settings(bars=False):  # stdio is the protocol: long work goes to the log on stderr
        serve(_open(args), principal)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "mcp",
        help="an MCP server on stdio: recall, context, get_fact, propose, approve, "
        "retract, forget, resolve_policy as tools",
        description="Serve the store to MCP clients over stdio. The principal is fixed here "
        "(flags, $MEMLAKE_AS/SCOPE/ROLE or --profile); clients cannot change it.",
    )
    _common(p)
    p.set_defaults(fn=cmd_mcp)
