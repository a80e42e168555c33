"""Maintenance never changes an answer: the model-based test with maintenance interleaved.

The machine of tests/_model.py, plus rules that compact, checkpoint (after the log's
retention has been shortened and its commit files aged, so Delta really deletes them)
and vacuum, between the same random writes, forgets, purges and reads. Every read rule,
including the fresh handle that has to rebuild system time from ``_commits``, is
compared with the model, which knows nothing of maintenance: if a maintenance step
changed what any principal sees at any basis, a read disagrees with the model.

The stores also run the automatic policy every few commits, so maintenance lands in
the middle of write sequences too. Bounded like tests/test_model_based.py
(``MEMLAKE_MODEL_EXAMPLES`` / ``MEMLAKE_MODEL_STEPS`` lengthen it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from _model import MemoryMachine, StoreFactory
from _support import age_files
from deltalake import DeltaTable
from hypothesis import HealthCheck, settings
from hypothesis.stateful import precondition, rule

import memory_lakehouse as ml
from memory_lakehouse.records import SPECS

EXAMPLES = int(os.environ.get("MEMLAKE_MODEL_EXAMPLES", "25"))
STEPS = int(os.environ.get("MEMLAKE_MODEL_STEPS", "25"))

MAINTAINED = StoreFactory(maintenance=ml.MaintenancePolicy(every_commits=4, every_bytes=None, keep_log_versions=0))


@pytest.fixture(scope="module", autouse=True)
def _shared_store() -> Iterator[None]:
    yield
    MAINTAINED.close()


class MaintainedStoreAgainstTheModel(MemoryMachine):
    """The model's rules hold whatever maintenance ran in between."""

    factory = MAINTAINED
    MAX_MAINTENANCE = 3  # each step rewrites files or the log: keep examples quick

    def __init__(self) -> None:
        super().__init__()
        self.maintenance_steps = 0

    def _maintain(self) -> ml.MemoryStore:
        """The store, once its own background run of the policy (if any) has ended: the rules below
        are an operator's manual steps, and the one that shortens the log's retention opens the
        tables with plain delta-rs, which a concurrent prune can pull a checkpoint from under."""
        self.maintenance_steps += 1
        assert self.store.maintenance.wait(timeout=120)
        return self.store

    def _read_back(self) -> None:
        """Read everything back, on this handle and on a new one (which has only the files to
        go by: ``_commits`` once the log forgot its old commits, nothing remembered): the
        last read, and a curator's recall of everything as of every commit written so far."""
        known = sorted({r.known_since for r in self.model.rows})
        specs = [("recall", "root-lead", {"as_of": t}, t, t, None, None, None, "plan") for t in known + [self.now()]]
        if self.last_read is not None:
            specs.append(self.last_read)
        fresh = self.factory.fresh_handle()
        try:
            for spec in specs:
                self.check_reads(self.store, spec)
                self.check_reads(fresh, spec)
        finally:
            fresh.close()

    @precondition(lambda self: self.maintenance_steps < self.MAX_MAINTENANCE)
    @rule()
    def compact(self) -> None:
        self._maintain().maintenance.compact()
        self._read_back()

    @precondition(lambda self: self.maintenance_steps < self.MAX_MAINTENANCE)
    @rule()
    def checkpoint_after_the_log_forgot_its_old_commits(self) -> None:
        """An operator shortens the log's retention, as Delta's defaults would, and the
        checkpoint's cleanup deletes the commit files: system time must survive it."""
        store = self._maintain()
        for table in SPECS:
            log = Path(store.root) / table / "_delta_log"
            if not log.is_dir():
                continue
            DeltaTable(str(log.parent)).alter.set_table_properties({"delta.logRetentionDuration": "interval 1 days"})
            age_files(log.glob("*.json"), days=60)
        store.lake.refresh(force=True)
        store.maintenance.checkpoint()
        self._read_back()

    @precondition(lambda self: self.maintenance_steps < self.MAX_MAINTENANCE)
    @rule()
    def vacuum_everything_removed(self) -> None:
        self._maintain().maintenance.vacuum(retain=timedelta(0), dry_run=False)
        self._read_back()


TestMaintainedStoreAgainstTheModel = MaintainedStoreAgainstTheModel.TestCase
TestMaintainedStoreAgainstTheModel.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
