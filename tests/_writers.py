"""Entry points of spawned writer processes (spawn imports them by name; never fork: deltalake panics)."""

from __future__ import annotations

from datetime import datetime

from _support import CURATOR, fact

import memory_lakehouse as ml


def child_writes(path: str, writes: int, start: datetime, started, out) -> None:
    """Append *writes* single facts to the store at *path* (policy off: the parent maintains)."""
    store = ml.open(
        path, clock=lambda: start, embedder=ml.HashingEmbedder(), maintenance=ml.MaintenancePolicy(None, None)
    )
    started.set()
    ids = []
    for n in range(writes):
        ids.append(store.write(fact(f"child:{n}", "plan", f"child plan {n}", start), by=CURATOR).record_id)
    store.close()
    out.put(ids)
