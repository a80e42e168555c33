"""`memlake mcp` answers a real MCP client over stdio: tools act as the principal fixed at
start-up, and library errors come back as tool errors carrying the one-line message."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

import memory_lakehouse as ml

pytestmark = pytest.mark.integration

LEAD = ml.Principal("lead", ml.Scope("acme", "support"), role="curator")
DAY1 = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "store")
    with ml.open(p, embedder=ml.HashingEmbedder(dim=64)) as store:
        store.write(
            ml.Fact("user:42", "plan", "Enterprise Pro", DAY1, source="user_explicit", evidence="crm:4812"), by=LEAD
        )
    return p


def server(path: str, *principal: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLAKE_")}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "memory_lakehouse.cli", "mcp", "--store", path, *principal], env=env
    )


def text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def payload(result):
    if getattr(result, "structured_content", None) is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(text(result))


async def _agent_session(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(server(path, "--as", "bot", "--scope", "acme/support/bot", "--role", "agent")) as client:
        out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        out["fact"] = payload(await client.call_tool("get_fact", {"subject": "user:42", "attribute": "plan"}))
        out["context"] = payload(await client.call_tool("context", {"query": "what plan is user 42 on"}))
        out["recall"] = payload(await client.call_tool("recall", {"query": "plan", "subject": "user:42"}))
        prop = await client.call_tool(
            "propose",
            {
                "record": {
                    "kind": "fact",
                    "subject": "user:42",
                    "attribute": "seats",
                    "value": 50,
                    "valid_from": "2026-09-02T00:00:00Z",
                    "source": "triage-bot@v1",
                    "scope": "acme/support",
                }
            },
        )
        out["proposal"] = payload(prop)
        out["approve_own"] = await client.call_tool("approve", {"record_id": out["proposal"]["record_id"]})
        out["forget"] = await client.call_tool("forget", {"subject": "user:42", "reason": "because"})
        out["naive"] = await client.call_tool(
            "get_fact", {"subject": "user:42", "attribute": "plan", "as_of": "2026-09-05"}
        )
    return out


async def _curator_session(path: str, proposal: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(server(path, "--as", "lead", "--scope", "acme/support", "--role", "curator")) as client:
        out["approve"] = payload(await client.call_tool("approve", {"record_id": proposal}))
        out["seats"] = payload(await client.call_tool("get_fact", {"subject": "user:42", "attribute": "seats"}))
        out["retract"] = payload(
            await client.call_tool("retract", {"record_id": out["approve"]["record_id"], "reason": "wrong seats"})
        )
        out["after"] = payload(await client.call_tool("get_fact", {"subject": "user:42", "attribute": "seats"}))
    return out


def test_an_mcp_client_reads_proposes_and_is_refused_what_its_role_may_not(path):
    out = asyncio.run(_agent_session(path))
    assert out["tools"] == [
        "approve",
        "context",
        "forget",
        "get_fact",
        "propose",
        "recall",
        "resolve_policy",
        "retract",
    ]
    assert out["fact"]["value"] == "Enterprise Pro"
    item = out["context"]["items"][0]
    assert "Enterprise Pro" in out["context"]["text"] and item["evidence"] == "crm:4812"
    assert item["source"] == "user_explicit" and item["record_id"].startswith("fac_")
    assert out["recall"][0]["record"]["value"] == "Enterprise Pro"
    assert out["proposal"]["record_id"].startswith("fac_")
    # the SDK prefixes "Error executing tool NAME: "; the rest is the CLI's one-line message
    for refused in (out["approve_own"], out["forget"]):
        assert refused.is_error and "PermissionDenied: bot is an agent" in text(refused) and "\n" not in text(refused)
    assert (
        out["naive"].is_error
        and "ValidationError: as_of" in text(out["naive"])
        and "no time zone" in text(out["naive"])
    )

    curator = asyncio.run(_curator_session(path, out["proposal"]["record_id"]))
    assert curator["seats"]["value"] == 50 and curator["after"] is None


def test_memlake_mcp_refuses_to_start_without_a_scope(path, capsys, monkeypatch):
    from memory_lakehouse.cli import main

    for name in ("MEMLAKE_AS", "MEMLAKE_SCOPE", "MEMLAKE_ROLE", "MEMLAKE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["mcp", "--store", path]) == 2
    assert "no scope" in capsys.readouterr().err
