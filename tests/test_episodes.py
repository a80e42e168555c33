"""Episodes: filter hard (service, env, version range, not superseded, expired or
inconclusive), then the newest five — and a correction supersedes what it corrects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import memory_lakehouse as ml

T = datetime(2026, 1, 5, tzinfo=UTC)
LEAD = ml.Principal("dana", ml.Scope("acme", "eng", "sre"), role="curator")


@pytest.fixture
def store(tmp_path):
    return ml.open(tmp_path / "s", clock=lambda: T, embedder=ml.HashingEmbedder())


def _pool_fix(**changes):
    ep = ml.Episode(
        "checkout",
        "prod",
        "p99 above 4s",
        "pool 20 -> 40",
        "fixed",
        T,
        evidence="https://inc/INC-101",
        source="review",
        version_from="v2.0",
    )
    return ep.replace(**changes) if changes else ep


@pytest.mark.parametrize("change", [{"version_to": "v2.3"}, {"action": "pool 20 -> 50"}, {"symptom": "p99 above 5s"}])
def test_a_correction_that_changes_any_content_supersedes_the_episode(store, change):
    first = store.write(_pool_fix(), by=LEAD)
    fixed = store.write(_pool_fix(supersedes=first.record_id, **change), by=LEAD)
    assert (fixed.action, fixed.supersedes) == ("superseded", first.record_id)
    served = store.episodes(service="checkout", env="prod", by=LEAD, version="v2.1")
    assert [e.record_id for e in served] == [fixed.record_id]


def test_closing_the_version_range_stops_the_fix_answering_for_later_versions(store):
    first = store.write(_pool_fix(), by=LEAD)
    assert [e.record_id for e in store.episodes(service="checkout", env="prod", by=LEAD, version="v3.1")] == [
        first.record_id
    ]
    store.write(_pool_fix(version_to="v2.3", supersedes=first.record_id), by=LEAD)
    assert store.episodes(service="checkout", env="prod", by=LEAD, version="v3.1") == []
    assert len(store.episodes(service="checkout", env="prod", by=LEAD, version="v2.3")) == 1


def test_restating_an_episode_unchanged_is_a_duplicate(store):
    first = store.write(_pool_fix(), by=LEAD)
    again = store.write(_pool_fix(supersedes=first.record_id), by=LEAD)
    assert (again.action, again.record_id) == ("duplicate", first.record_id)
