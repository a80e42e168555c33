"""Entry points of spawned writer processes (spawn imports them by name; never fork: deltalake panics)."""

from __future__ import annotations

from datetime import datetime

from _support import CURATOR, fact

import memory_lakehouse as ml


def child_writes(path: str, writes: int, start: datetime, started, out, halfway=None, resume=None) -> None:
    """Append *writes* single facts to the store at *path* (policy off: the parent maintains).

    With *halfway* and *resume* (events), after half of them it says so and waits for the
    parent to resume it: the parent's compaction then lands between the child's writes
    whatever the machine's load (under a loaded CI run, 40 unpaused writes could all land
    before the parent's first compaction).
    """
    store = ml.open(
        path, clock=lambda: start, embedder=ml.HashingEmbedder(), maintenance=ml.MaintenancePolicy(None, None)
    )
    started.set()
    ids = []
    for n in range(writes):
        if n == writes // 2 and halfway is not None and resume is not None:
            halfway.set()
            resume.wait(120)
        ids.append(store.write(fact(f"child:{n}", "plan", f"child plan {n}", start), by=CURATOR).record_id)
    store.close()
    out.put(ids)
