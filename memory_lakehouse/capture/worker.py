"""Extraction off the request path: a worker that runs `ExtractionTask`s in the background.

`ExtractionWorker` is the embedded default: a thread runs each task (reads the turns
back, extracts, writes); with ``processes=N`` the extraction itself — the CPU work of a
model extractor — runs in a pool of *spawned* processes (never forked: deltalake panics
in a forked child), and the child never touches the store: it gets turns, returns
records, and the parent's thread writes them.

From a real queue (Redis Streams, Kafka, SQS): the request handler calls
``store.capture(..., worker=QueueWorker)`` where ``QueueWorker.submit(store, task, by,
extractor)`` publishes ``task.to_dict()`` (ids and generations, no content); the
consumer, in its own process, opens the same store and calls
``store.extract(ExtractionTask.from_dict(message), by=worker_principal)``. The task
carries each subject's deletion generation from before the turns were written, so a
consumer that runs after a forget writes nothing (`CaptureResult.status == "dropped"`)
however late it runs, and a redelivered message adds nothing (duplicates and sightings
are per turn).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..conversation import Turn
from ..records import Envelope
from ..scope import Principal
from .extract import Extractor, RuleExtractor
from .pipeline import CaptureResult, ExtractionTask, _turn, run_task, write_extracted

if TYPE_CHECKING:
    from ..store import MemoryStore


def _extract_in_child(extractor: Extractor, turns: Sequence[Turn], subject: str | None) -> list[Envelope]:
    return list(extractor.extract(turns, subject=subject))


class ExtractionWorker:
    """Runs capture's extraction in the background: ``store.capture(..., worker=ExtractionWorker())``.

    >>> worker = ExtractionWorker(); worker.close()
    """

    def __init__(self, *, threads: int = 1, processes: int = 0) -> None:
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="memlake-extract")
        self._processes = (
            ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"))
            if processes
            else None
        )

    def submit(
        self, store: MemoryStore, task: ExtractionTask, by: Principal, extractor: Extractor | None
    ) -> Future[CaptureResult]:
        return self._threads.submit(self._run, store, task, by, extractor)

    def _run(
        self, store: MemoryStore, task: ExtractionTask, by: Principal, extractor: Extractor | None
    ) -> CaptureResult:
        if self._processes is None:
            return run_task(store, task, by=by, extractor=extractor)
        extractor = extractor or RuleExtractor()
        rows = {r["record_id"]: r for r in store.vis.by_ids("turn", list(task.turn_ids)).to_pylist()}
        if len(rows) < len(set(task.turn_ids)):
            return CaptureResult("dropped", reason="a turn of the session was forgotten before extraction")
        turns = sorted((_turn(r) for r in rows.values()), key=lambda t: t.position)
        found = self._processes.submit(_extract_in_child, extractor, turns, task.subject).result()
        return write_extracted(store, task, found, turns, by=by, source=extractor.name)

    def close(self, wait: bool = True) -> None:
        """Finish (or with ``wait=False`` abandon) queued tasks and stop the pools."""
        self._threads.shutdown(wait=wait)
        if self._processes is not None:
            self._processes.shutdown(wait=wait)

    def __enter__(self) -> ExtractionWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
