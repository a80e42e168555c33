"""A small LangGraph agent whose long-term memory is the lakehouse (`LakehouseStore`).

The graph: recall (search the user's namespace) -> respond (a scripted model: no network,
no weights) -> remember (what the user said they like, put back into the store). Two
conversations on two days: the second one is answered from what the first stored, a
colleague in a sibling scope sees nothing, and an as-of read shows what the agent knew
before. Self-checking: exit 1 when a check fails.

    python scripts/langgraph_agent.py [--store PATH]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

import memory_lakehouse as ml
from memory_lakehouse.integrations.langgraph import LakehouseStore


class State(TypedDict, total=False):
    user: str
    message: str
    memories: list[str]
    reply: str


def recall(state: State, *, store: BaseStore) -> State:
    hits = store.search(("memories", state["user"]), query=state["message"], limit=3)
    return {"memories": [h.value["text"] for h in hits]}


def respond(state: State) -> State:
    """A scripted stand-in for a chat model: answers from the memories it was handed, or asks."""
    likes = [m for m in state.get("memories", []) if m.startswith("likes ")]
    if "recommend" in state["message"].lower():
        reply = (
            f"Since you {likes[0].replace('likes', 'like', 1)}, try the new place on 5th."
            if likes
            else "What kind of food do you like?"
        )
    else:
        reply = "Noted."
    return {"reply": reply}


def remember(state: State, *, store: BaseStore) -> State:
    match = re.search(r"\bi (?:like|love) ([\w ]+)", state["message"].lower())
    if match:
        store.put(("memories", state["user"]), "food", {"text": f"likes {match.group(1).strip()}"})
    return {}


def build(store: BaseStore) -> Any:
    graph = StateGraph(State)
    graph.add_node("recall", recall)
    graph.add_node("respond", respond)
    graph.add_node("remember", remember)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "respond")
    graph.add_edge("respond", "remember")
    graph.add_edge("remember", END)
    return graph.compile(store=store)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store path (default: a fresh temporary directory)")
    args = parser.parse_args(argv)
    now = [datetime(2026, 9, 1, 9, tzinfo=UTC)]
    lake = ml.open(
        args.store or tempfile.mkdtemp(prefix="lg-agent-"), clock=lambda: now[0], embedder=ml.HashingEmbedder()
    )
    alice = ml.Principal("concierge", ml.Scope("acme", "support", "concierge"), role="member")
    agent = build(LakehouseStore(lake, by=alice))
    failed: list[str] = []

    def check(what: str, ok: bool) -> None:
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            failed.append(what)

    first = agent.invoke({"user": "u42", "message": "Hi! I love thai food."})
    print(f"day 1  user> Hi! I love thai food.\n       agent> {first['reply']}")
    before = now[0]
    now[0] += timedelta(days=1)
    second = agent.invoke({"user": "u42", "message": "Can you recommend a restaurant?"})
    print(f"day 2  user> Can you recommend a restaurant?\n       agent> {second['reply']}")
    check("the second conversation is answered from what the first stored", "thai food" in second["reply"])

    colleague = ml.Principal("sales-bot", ml.Scope("acme", "sales", "bot"), role="member")
    other = build(LakehouseStore(lake, by=colleague)).invoke({"user": "u42", "message": "recommend something"})
    check("a sibling scope's agent sees none of it", other["memories"] == [])

    lg = LakehouseStore(lake, by=alice)
    check(
        "as of before day 1's commit, the store knew nothing",
        lg.search(("memories", "u42"), as_of=before - timedelta(seconds=1)) == [],
    )
    record = lake.get_fact(lg.subject_of(("memories", "u42")), "food", by=alice)
    check("the memory is an attributed fact in the store", record is not None and record.source == "langgraph")
    lake.close()
    print("langgraph agent: all checks passed" if not failed else f"langgraph agent: {len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
