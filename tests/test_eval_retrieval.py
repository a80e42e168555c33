"""The retrieval fixture is reproducible and the eval over it never sees a hidden memory."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import memory_lakehouse as ml

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "data" / "retrieval" / "fixture.jsonl"
sys.path.insert(0, str(ROOT))  # evals/ is a top-level package of the repository

from evals import retrieval  # noqa: E402


def test_the_committed_fixture_is_what_its_generator_writes(tmp_path):
    committed = FIXTURE.read_bytes()
    generator = runpy.run_path(str(ROOT / "data" / "retrieval" / "make_fixture.py"))
    generator["main"](tmp_path / "fixture.jsonl")  # runs the fixture's own checks first
    assert (tmp_path / "fixture.jsonl").read_bytes() == committed
    assert len(committed) < 1_000_000


def test_every_answer_is_visible_to_its_asker_and_no_hidden_memory_is(tmp_path):
    """Visibility is the same for every ranker, so one wide recall per query covers all three."""
    fixture = retrieval.Fixture.load(FIXTURE)
    store = ml.open(tmp_path / "store", clock=lambda: fixture.now, embedder=ml.HashingEmbedder(dim=64))
    ids = retrieval.load_store(store, fixture)
    label_of = {rid: label for label, rid in ids.items()}
    memory = {m["label"]: m for m in fixture.memories}
    for q in fixture.queries:
        who = fixture.principals[q["principal"]]
        seen = {label_of[h.record_id] for h in store.recall(q["text"], by=who, k=len(ids), signals=("bm25",))}
        assert q["answer"] in seen, q
        assert not [x for x in seen if memory[x]["role"] == "superseded"], q
        assert all(retrieval.readable(who, memory[x]["scope"]) for x in seen), q
        # and nothing else is hidden: per slot, the current version at the most specific readable scope
        current = [m for m in fixture.memories if m["role"] != "superseded" and retrieval.readable(who, m["scope"])]
        deepest: dict[tuple, dict] = {}
        for m in current:
            if slot(m) not in deepest or m["scope"].count("/") > deepest[slot(m)]["scope"].count("/"):
                deepest[slot(m)] = m
        assert seen == {m["label"] for m in deepest.values()}, q


def slot(m: dict) -> tuple:
    f = m["fields"]
    if m["kind"] in ("fact", "preference"):
        return m["kind"], f["subject"], f["attribute"]
    return (m["kind"], f["uri"]) if m["kind"] == "reference" else (m["kind"], m["label"])
