"""Replay of many past decisions over a large store (JSON; nothing asserted).

    .venv/bin/python scripts/bench_replay.py                          # 10,000 decisions at 100k rows
    .venv/bin/python scripts/bench_replay.py --records 20000 --decisions 2000

The store: `memory_lakehouse.bench.ingest` (facts over 20 orgs, per-org batches of 1,000,
each window committed an hour after its last valid_from, so past bases see part of the
store). The decisions: readers at team scope in every org, each about one subject of its
org, decided at a random instant of the ingest's span. Reported: one `store.replay` of
all of them (cold: the first read of the store in this process, which mirrors the
tables into DuckDB; warm: the same call again), the same decisions replayed one org at a
time (the fan-out an engine would run per org in parallel), rows seen, leakage rate.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memory_lakehouse as ml
from memory_lakehouse.bench import ORGS, T0, _ManualClock, ingest, peak_rss_mb


def decisions(records: int, count: int, seed: int = 11) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        i = rng.randrange(records)
        org = ORGS[i % len(ORGS)]
        reader = ml.Principal(f"agent-{org}", ml.Scope(org, "support", f"team{i % 5}"), role="member")
        decided = T0 + timedelta(minutes=rng.uniform(0, records + 120))
        out.append((f"d{n}", reader, "", f"user:{i // 4}", decided))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=10_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        clock = _ManualClock(T0)
        store = ml.open(Path(tmp) / "store", clock=clock, embedder=ml.HashingEmbedder())
        t = time.perf_counter()
        ingest(store, args.records, clock=clock)
        built = time.perf_counter() - t
        store.close()
        store = ml.open(Path(tmp) / "store", clock=clock, embedder=ml.HashingEmbedder(), create=False)
        batch = decisions(args.records, args.decisions)
        t = time.perf_counter()
        cold = store.replay(batch, kinds=["fact"])
        cold_s = time.perf_counter() - t
        t = time.perf_counter()
        warm = store.replay(batch, kinds=["fact"])
        warm_s = time.perf_counter() - t
        by_org: dict[str, list[tuple]] = {}
        for d in batch:
            by_org.setdefault(d[1].scope.org, []).append(d)
        t = time.perf_counter()
        per_org_rows = sum(store.replay(ds, kinds=["fact"]).visible.num_rows for ds in by_org.values())
        fan_s = time.perf_counter() - t
        report = {
            "records": args.records,
            "decisions": args.decisions,
            "ingest_s": round(built, 1),
            "replay_cold_s": round(cold_s, 3),
            "replay_warm_s": round(warm_s, 3),
            "replay_per_org_sequential_s": round(fan_s, 3),
            "orgs": len(by_org),
            "visible_rows": cold.visible.num_rows,
            "per_org_rows": per_org_rows,
            "same_rows_warm": warm.visible.num_rows == cold.visible.num_rows,
            "leakage_rate": cold.leakage_rate,
            "peak_rss_mb": peak_rss_mb(),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
