"""tests/_recording.py: a recorded run replays on a fresh store, and a cache's failure
shrinks to the calls that cause it."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from _recording import Recording, replay, shrink

import memory_lakehouse as ml
from memory_lakehouse import heads

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OPTIONS: dict[str, Any] = {"embedder": ml.HashingEmbedder(dim=32)}  # how the recorded store was opened


def _codes_numbered_while_the_map_grows(lookup, values):
    """`heads._codes_of` as it was before feece43: two new values take n and n + 2."""
    missing = [v for v in dict.fromkeys(values) if v is not None and v not in lookup]
    if missing:
        lookup = dict(lookup)
        lookup.update((v, len(lookup) + m) for m, v in enumerate(missing))
    more = np.fromiter((-1 if v is None else lookup[v] for v in values), np.int32, len(values))
    return more, lookup


def _recorded_run(tmp_path):
    """Writes and reads in two orgs, ending with bob's read of his own fact after cy, a new
    actor of his team, wrote one; the calls and what each read returned."""
    now = [T0 + timedelta(days=10)]
    recording = Recording(str(tmp_path / "run.pkl"), lambda: now[0])
    store = recording.wrap(ml.open(tmp_path / "s", clock=lambda: now[0], **OPTIONS), "main")
    lead = ml.Principal("lead", ml.Scope("acme"), role="steward")
    other = ml.Principal("lead", ml.Scope("globex"), role="steward")
    actors = {a: ml.Principal(a, ml.Scope("acme", "support", "t1", a), role="member") for a in ("ann", "bob", "cy")}

    def fact(value, scope):
        return ml.Fact("user:1", "plan", value, T0, source="crm", scope=scope)

    store.write(fact("the org's", ml.Scope("acme")), by=lead)
    store.write(fact("globex's", ml.Scope("globex")), by=other)
    store.get_fact("user:1", "plan", by=actors["ann"])
    store.recall("plan", by=other, kinds=["fact"])
    for step, batch in enumerate((("ann", "bob"), ("cy",))):
        now[0] += timedelta(minutes=5)
        store.write_many([fact(f"{a}'s", actors[a].scope) for a in batch], by=lead)
        store.write(fact(f"globex {step}", ml.Scope("globex", "sales")), by=other)
        store.get_fact("user:1", "plan", by=actors["ann"])
    last = store.get_fact("user:1", "plan", by=actors["bob"])
    store.close()
    return recording, last


def test_a_failure_of_a_cache_replays_on_a_fresh_store_and_shrinks_to_its_cause(tmp_path, monkeypatch):
    monkeypatch.setattr(heads, "_codes_of", _codes_numbered_while_the_map_grows)
    recording, last = _recorded_run(tmp_path)
    assert last is not None and last.value == "cy's"  # the planted bug: bob is served cy's fact
    calls = recording.calls
    assert calls[-2].name == "get_fact" and calls[-1].name == "close"
    calls = calls[:-1]  # end at the failed read, as a run saved at its first failure does
    assert replay(calls, OPTIONS, list(range(len(calls))))

    kept = shrink(calls, OPTIONS, say=lambda line: None)
    assert kept[-1] == len(calls) - 1 and len(kept) < len(calls)
    assert replay(calls, OPTIONS, kept)
    names = [calls[i].name for i in kept]
    assert "write_many" in names  # the two new actors in one advance are part of the cause
    assert all(calls[i].kwargs["by"].scope.org == "acme" for i in kept)  # globex's calls are not


def test_a_run_without_the_failure_replays_with_the_long_lived_handle_agreeing(tmp_path):
    recording, last = _recorded_run(tmp_path)
    assert last is not None and last.value == "bob's"
    calls = recording.calls[:-1]
    assert not replay(calls, OPTIONS, list(range(len(calls))))


def test_a_recording_is_saved_once_with_the_calls_since_the_store_was_made(tmp_path):
    recording, _ = _recorded_run(tmp_path)
    recording.save()
    recording.calls.append(recording.calls[0])
    recording.save()  # the first failure's calls stay: shrinking later ones would not explain it
    with open(tmp_path / "run.pkl", "rb") as f:
        saved = pickle.load(f)
    assert len(saved["calls"]) == len(recording.calls) - 1
    assert [c.name for c in saved["calls"][:2]] == ["write", "write"]
    assert saved["calls"][0].result and saved["calls"][0].result[0].startswith("fac_")
