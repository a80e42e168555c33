"""agent_loop's model extractor: the model decides the soft cases, the rules keep the hard boundaries."""

from __future__ import annotations

from _support import MEMBER, SimClock, present

import memory_lakehouse as ml
from agent_loop import ModelExtractor


class ScriptedModel:
    """A stand-in chat model that answers from a table and records every line it was shown."""

    name = "scripted"

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.shown: list[str] = []

    def complete(self, messages, *, max_tokens=128):
        line = messages[-1]["content"]
        self.shown.append(line)
        return self.answers.get(line, "NONE")


def test_the_model_extractor_never_shows_secrets_traces_or_greetings_to_the_model(tmp_path):
    store = ml.open(tmp_path / "s", clock=SimClock(), embedder=ml.HashingEmbedder())
    model = ScriptedModel({"We ride bikes to work every day": "The user bikes to work daily."})
    lines = [
        "Hi there!",
        "my token is sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "KeyError: 'pool'",
        "We ride bikes to work every day",
        "I moved to Austin",
        "the sky looked odd today",
    ]
    job = store.capture(
        "s1",
        [{"role": "user", "text": t} for t in lines],
        by=MEMBER,
        subject="user:42",
        extractor=ModelExtractor(model),
    )
    result = job.result()
    assert model.shown == ["We ride bikes to work every day", "the sky looked odd today"]
    kinds = sorted((r.kind, r.action) for r in result.results)
    assert kinds == [("fact", "inserted"), ("memory", "inserted")]
    # the rules' attribute, so it can supersede
    assert present(store.get_fact("user:42", "city", by=MEMBER)).value == "Austin"
    memory = store.recall("bikes", by=MEMBER, subject="user:42", kinds=["memory"])[0].record
    assert isinstance(memory, ml.Memory)
    assert memory.text == "The user bikes to work daily." and memory.authority == "model_guess"
    assert memory.derived_from == (job.turns[3].record_id,)
