"""An extractor that asks the local chat model, behind the library's `Extractor` protocol.

    store.capture(session, messages, by=app, extractor=ModelExtractor(SmolLM2()))

The hard boundaries stay in code: a sentence the rules call a secret, a trace or a
greeting is never sent to the model, and one the rules already turn into a named
attribute (``I moved to Austin`` -> ``city``) keeps the rules' record, so reconcile can
supersede it. For everything else the model decides whether the line is durable memory
and, if so, restates it in one line; what it returns is a `Memory` with authority
``model_guess``, derived from its turn like every extracted record.

The library never imports this module (`memory_lakehouse` knows only the protocol).
"""

from __future__ import annotations

from collections.abc import Sequence

import memory_lakehouse as ml

from .model import ChatModel

PROMPT = (
    "You extract long-term memory from one line a user said. If the line states a preference, a constraint, "
    "a verified configuration, a confirmed fact, a correction, or a goal with a deadline, reply with that "
    "statement in one short line. If it is small talk, a question, a guess or a debugging detail, reply NONE."
)
HARD_DROPS = frozenset({"secret", "trace", "greeting"})


class ModelExtractor:
    """Extraction by a `ChatModel` (e.g. `SmolLM2`), with the rules' hard boundaries in front of it."""

    def __init__(self, model: ChatModel, *, max_tokens: int = 48) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.name = f"model:{model.name}"

    def extract(self, turns: Sequence[ml.Turn], subject: str | None = None) -> list[ml.Envelope]:
        rules = ml.RuleExtractor()
        out: list[ml.Envelope] = []
        for turn in turns:
            if turn.role != "user" or turn.record_id is None:
                continue
            about = subject or turn.subject_name
            for sentence in rules.sentences(turn.text):
                verdict = rules.verdict(sentence)
                if verdict.rule in HARD_DROPS:
                    continue  # never shown to the model
                if verdict.keep and verdict.attribute:
                    out.extend(rules.extract([turn.replace(text=sentence)], subject))
                    continue
                reply = self.model.complete(
                    [{"role": "system", "content": PROMPT}, {"role": "user", "content": sentence}],
                    max_tokens=self.max_tokens,
                )
                statement = (reply or "").strip().splitlines()[0].strip() if (reply or "").strip() else ""
                if not statement or statement.upper().startswith("NONE"):
                    continue
                out.append(
                    ml.Memory(
                        about,
                        statement[:500],
                        turn.said_at,
                        source=f"extractor:{self.name}",
                        derived_from=(turn.record_id,),
                        evidence=f"{turn.session_id}#{turn.position}",
                        authority="model_guess",
                    )
                )
        return out
