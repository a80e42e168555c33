"""The store against a plain reference model, on random operations (tests/_model.py).

Bounded in ``make test``; ``MEMLAKE_MODEL_EXAMPLES=10000`` runs that many sequences
(``MEMLAKE_MODEL_STEPS`` sets their length). A failure hypothesis cannot shrink (the
examples share a store): run again with ``MEMLAKE_MODEL_RECORD=run.pkl``, then
``python tests/_recording.py run.pkl``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _model import FACTORY, MemoryMachine
from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("MEMLAKE_MODEL_EXAMPLES", "300"))
STEPS = int(os.environ.get("MEMLAKE_MODEL_STEPS", "30"))


@pytest.fixture(scope="module", autouse=True)
def _shared_store() -> Iterator[None]:
    yield
    FACTORY.close()


class StoreAgainstTheModel(MemoryMachine):
    """Every rule of tests/_model.py, as is."""


TestStoreAgainstTheModel = StoreAgainstTheModel.TestCase
TestStoreAgainstTheModel.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
