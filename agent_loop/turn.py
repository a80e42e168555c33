"""One agent turn over the public API: read governed memory, ask the model, propose what was learned.

The turn does no filtering of its own. Everything the model sees comes from
``store.context(message, by=principal, ...)``: the store decides what this principal
may see at this basis (its own scope and its ancestors', never a sibling's; only the
current version of a slot; nothing retracted, expired, proposed or forgotten), packs it
within a token budget and puts provenance on every line. So the safety lives in the
store, not in the prompt: a model that ignored every instruction could still only
repeat what the store let through.

Writing goes the other way only through ``store.propose``: an agent's learnings are
drafts (status ``proposed``, authority ``model_guess``) that no read serves until a
curator approves them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import memory_lakehouse as ml

from .model import ChatModel

SYSTEM_PROMPT = (
    "You are {agent}, a customer support agent. Answer in one or two sentences using only "
    "the memory below, and cite the evidence id in brackets. If the memory does not say, "
    "answer that you do not know.\n\n{memory}"
)
NO_MEMORY = "Memory: (nothing visible to you)"


@dataclass(frozen=True)
class Proposal:
    """A record the agent proposed in this turn: a draft a curator may approve, never served before."""

    record_id: str
    kind: str
    subject: str
    scope: ml.Scope
    status: str = "proposed"  # what `store.propose` always creates


@dataclass(frozen=True)
class TurnResult:
    """What happened in one turn: exactly what the model saw, what it said, what was proposed."""

    turn_id: str
    principal: str
    message: str
    context: str  # the memory block from `store.context` ("" when nothing is visible)
    prompt: tuple[dict, ...]  # the messages sent to the model, verbatim
    reply: str
    proposals: tuple[Proposal, ...]
    model: str
    memory_seconds: float
    model_seconds: float


def run_turn(
    store: ml.MemoryStore,
    model: ChatModel,
    message: str,
    *,
    by: ml.Principal,
    subject: str | None = None,
    learned: Sequence[ml.Envelope] = (),
    propose_scope: ml.Scope | None = None,
    budget_tokens: int = 400,
    max_tokens: int = 96,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    valid_at: datetime | None = None,
) -> TurnResult:
    """Answer *message* as *by* from the memory the store lets it see, then propose *learned*.

    *learned* are typed records the agent took from this turn (what the user stated, a
    tool's result); each is proposed at *propose_scope* (None: the agent's own scope),
    with the turn as evidence, the agent and model as source, and the turn as the
    record's reason when the record names none. The read basis (``as_of`` /
    ``known_at`` / ``valid_at``) goes to the store unchanged, so a turn can be replayed
    as of a past moment.

    >>> # result = run_turn(store, SmolLM2(), "What plan am I on?", by=bot, subject="customer-728")
    >>> # result.context   # the only memory the model saw; result.reply  # what it said
    """
    turn_id = f"turn_{os.urandom(6).hex()}"
    started = time.perf_counter()
    context = store.context(
        message, by=by, subject=subject, budget_tokens=budget_tokens, as_of=as_of, known_at=known_at, valid_at=valid_at
    )
    memory_seconds = time.perf_counter() - started

    prompt = (
        {"role": "system", "content": SYSTEM_PROMPT.format(agent=by.id, memory=context or NO_MEMORY)},
        {"role": "user", "content": message},
    )
    started = time.perf_counter()
    reply = model.complete([dict(m) for m in prompt], max_tokens=max_tokens)
    model_seconds = time.perf_counter() - started

    proposals = []
    for record in learned:
        draft = record.replace(
            evidence=record.evidence or f"agent:{turn_id}",
            source=record.source or f"{by.id}/{model.name}",
            reason=record.reason or f"{by.id} learned this in {turn_id}",
        )
        # the commit's reason is kept apart from the record's: the commit log outlives a purge,
        # so it must not repeat anything the row holds
        res = store.propose(draft, by=by, scope=propose_scope, reason=f"agent turn {turn_id}")
        proposals.append(Proposal(res.record_id, res.kind, draft.subject_name, res.scope))
    return TurnResult(
        turn_id, by.id, message, context, prompt, reply, tuple(proposals), model.name, memory_seconds, model_seconds
    )
