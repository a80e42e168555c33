"""`python -m agent_loop.demo`: a local model answers support tickets through the memory layer.

A support-triage story over three simulated weeks on a fresh store. A 135M-parameter
model (SmolLM2, llama.cpp, CPU) plays the tier-2 triage bot; every turn prints the
memory block the store handed it, its reply, and checks on what the store let
through. The checks are on the store side only (what reached the prompt): the model's
free text is shown, never asserted — the point is that the guarantees hold whatever
the model says.

Exit status: 0 when every check passes, 1 when one fails, 2 when the local model is not
installed (run `make agent`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import memory_lakehouse as ml

from .model import ChatModel, ModelUnavailable, SmolLM2
from .ollama_model import build_model
from .turn import TurnResult, run_turn

CUSTOMER = "customer-728"
DAY1 = datetime(2026, 9, 1, 9, tzinfo=UTC)


class _Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def __call__(self, label: str, ok: bool) -> None:
        print(f"  [{'ok  ' if ok else 'FAIL'}] {label}")
        if not ok:
            self.failed.append(label)


def _show(n: int, day: int, result: TurnResult, scope: ml.Scope, note: str = "") -> None:
    print(f"\n-- turn {n} · day {day}{note} · {result.principal} ({scope})")
    print(f"  user   > {result.message}")
    for line in (result.context or "(no memory visible)").splitlines():
        print(f"  memory | {line}")
    reply = textwrap.fill(
        " ".join(result.reply.split()) or "(empty)",
        width=96,
        initial_indent="  model  > ",
        subsequent_indent="           ",
    )
    print(f"{reply}\n           ({result.model_seconds:.2f} s model, {result.memory_seconds * 1000:.0f} ms memory)")


def _prepare(path: str | None) -> str:
    """A fresh store directory: a new temporary one, or *path* emptied if it is a store."""
    if path is None:
        return str(Path(tempfile.mkdtemp(prefix="agent-demo-")) / "store")
    root = Path(path)
    if root.exists() and any(root.iterdir()):
        if not (root / "_ledger").is_dir():
            raise SystemExit(f"agent_loop.demo: {root} exists and is not a memory store; pick another --store")
        shutil.rmtree(root)
    return str(root)


def run(path: str, model: ChatModel, *, max_tokens: int = 64) -> list[str]:
    """Tell the story on a fresh store at *path*; return the labels of failed checks."""
    now = [DAY1]
    store = ml.open(path, clock=lambda: now[0])
    check = _Checks()

    org, tier1, tier2 = ml.Scope("acme"), ml.Scope("acme", "support", "tier1"), ml.Scope("acme", "support", "tier2")
    kb_editor = ml.Principal("kb-editor", org, role="curator")
    lead1 = ml.Principal("tier1-lead", tier1, role="curator")
    lead2 = ml.Principal("tier2-lead", tier2, role="curator")
    bot = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "bot"), role="agent")
    bot1 = ml.Principal("tier1-bot", ml.Scope("acme", "support", "tier1", "bot"), role="agent")
    dpo = ml.Principal("dpo", org, role="steward")
    turns: list[TurnResult] = []

    def turn(day: int, who: ml.Principal, message: str, note: str = "", **kw) -> TurnResult:
        result = run_turn(store, model, message, by=who, max_tokens=max_tokens, **kw)
        turns.append(result)
        _show(len(turns), day, result, who.scope, note)
        return result

    print(f"store: {store.root}   model: {model.name}")
    print("\n== day 1: shared knowledge base (org), the customer's plan (tier 2), a retention note (tier 1)")
    store.write(
        ml.Reference(
            "kb://plans/seats",
            "Seat limits",
            "Starter plans allow 5 members; Enterprise plans allow up to 100 members.",
            DAY1,
            source="kb@v4",
            evidence="kb://plans/seats",
        ),
        by=kb_editor,
    )
    first = store.write(
        ml.Fact(CUSTOMER, "plan", "Free Starter", DAY1, source="crm", evidence="crm:evt-101", scope=tier2), by=lead2
    )
    store.write(
        ml.Fact(
            CUSTOMER,
            "retention_offer",
            "40% discount if they threaten to churn",
            DAY1,
            source="crm",
            evidence="crm:note-77",
            scope=tier1,
        ),
        by=lead1,
    )
    now[0] = DAY1 + timedelta(days=13)
    upgrade = store.write(
        ml.Fact(CUSTOMER, "plan", "Enterprise Pro", now[0], source="billing", evidence="billing:inv-2231", scope=tier2),
        by=lead2,
    )
    print(f"day 14: plan upgraded to Enterprise Pro ({upgrade.action} {upgrade.supersedes})")
    check(
        "the upgrade supersedes the old plan", upgrade.action == "superseded" and upgrade.supersedes == first.record_id
    )

    print("\n== day 20: the customer writes in; the triage bot answers from what the store lets it see")
    now[0] = DAY1 + timedelta(days=19)
    seats = ml.Fact(
        CUSTOMER,
        "seats_requested",
        "50",
        now[0],
        source="",
        authority="customer_claim",
        evidence="chat:728-1",
        reason="the customer asked for it in chat",
    )
    t1 = turn(
        20,
        bot,
        f"Hi, this is {CUSTOMER}. What plan am I on, and can I invite 50 members?",
        learned=[seats],
        propose_scope=tier2,
    )
    check(
        "the current plan reached the prompt, with its evidence",
        'plan: "Enterprise Pro"' in t1.context and "billing:inv-2231" in t1.context,
    )
    check("the superseded plan did not", '"Free Starter"' not in t1.context and "crm:evt-101" not in t1.context)
    check("the org's shared knowledge base did (an ancestor scope)", "kb://plans/seats" in t1.context)
    check(
        "tier 1's retention note did not (a sibling team)", "crm:note-77" not in t1.context and "40%" not in t1.context
    )
    check(
        "what the agent learned is a proposal, not memory",
        [p.status for p in t1.proposals] == ["proposed"]
        and store.get_fact(CUSTOMER, "seats_requested", by=bot) is None,
    )

    t2 = turn(20, bot, "How many seats did I ask for?", note=" (before approval)", subject=CUSTOMER)
    check("an unapproved proposal never reaches the prompt", "seats_requested" not in t2.context)
    approved = store.approve(t1.proposals[0].record_id, by=lead2)
    print(f"  tier2-lead approves the proposal -> {approved.record_id}")
    t3 = turn(20, bot, "How many seats did I ask for?", note=" (after approval)", subject=CUSTOMER)
    check(
        "after approval the learned fact is served, attributed to the bot and model",
        'seats_requested: "50"' in t3.context and f"triage-bot/{model.name}" in t3.context,
    )

    t4 = turn(
        20, bot1, f"What do we know about {CUSTOMER}'s plan and any offers?", subject=CUSTOMER, note=" (sibling team)"
    )
    check("the tier-1 bot sees its own team's note", "crm:note-77" in t4.context)
    check(
        "and none of tier 2's memory",
        "billing:inv-2231" not in t4.context
        and "seats_requested" not in t4.context
        and "Enterprise Pro" not in t4.context,
    )

    t5 = turn(
        10, bot, "What plan am I on?", subject=CUSTOMER, as_of=DAY1 + timedelta(days=9), note=" (replayed as of day 10)"
    )
    check(
        "replayed as of day 10, the prompt holds the plan known then and nothing later",
        'plan: "Free Starter"' in t5.context
        and "Enterprise Pro" not in t5.context
        and "seats_requested" not in t5.context,
    )

    print(f"\n== day 21: erasure request — forget {CUSTOMER}, then purge")
    now[0] = DAY1 + timedelta(days=20)
    report = store.forget(CUSTOMER, by=dpo, reason="erasure request")
    purge = store.purge(by=dpo)
    print(f"forgot {CUSTOMER} (generation {report.generation})")
    print(textwrap.indent(purge.summary(), "  "))
    check("purge verified no erased value is left under the store", purge.verified is True)
    t6 = turn(21, bot, f"Hi, this is {CUSTOMER}. What plan am I on, and can I invite 50 members?")
    check(
        "the forgotten customer is gone from the prompt (the bot's approved fact too)",
        CUSTOMER not in t6.context and "billing:inv-2231" not in t6.context,
    )
    t7 = turn(21, bot1, f"What do we know about {CUSTOMER}?", note=" (sibling team)")
    check("gone for the sibling team as well", CUSTOMER not in t7.context and "crm:note-77" not in t7.context)

    seconds = [t.model_seconds for t in turns]
    print(
        f"\nmodel latency per turn: mean {sum(seconds) / len(seconds):.2f} s, max {max(seconds):.2f} s "
        f"over {len(seconds)} turns (max_tokens={max_tokens})"
    )
    return check.failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_loop.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store path, emptied first (default: a fresh temporary directory)")
    parser.add_argument("--max-tokens", type=int, default=64, help="reply length cap per turn (default 64)")
    parser.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (bundled, llama.cpp) or ollama:NAME (a local Ollama server; default smollm2)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        model = SmolLM2() if args.model == "smollm2" else build_model(args.model)
    except ModelUnavailable as exc:
        print(f"agent_loop.demo: {exc}", file=sys.stderr)
        return 2
    print(
        f"loaded {model.name} from {getattr(model, 'model_path', 'the server')} in "
        f"{time.perf_counter() - started:.2f} s"
    )
    failed = run(_prepare(args.store), model, max_tokens=args.max_tokens)
    model.close()
    if failed:
        print(f"agent_loop demo: {len(failed)} check(s) failed: {'; '.join(failed)}")
        return 1
    print(f"agent_loop demo: all checks passed in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
