"""Measure forgetting one subject in a large store and print JSON (nothing is asserted).

    .venv/bin/python scripts/bench_purge.py                  # 100k records, ~1-2 minutes on 2 cores
    .venv/bin/python scripts/bench_purge.py --records 20000  # quicker

The store: `memory_lakehouse.bench.ingest` (facts over 20 orgs, batches of 1,000) for all
but the last 4,000 records, which are four 1,000-row batches in org00 each holding ten
of the subject's facts — so the purge must rewrite shared files, not just drop the
subject's own. Every org gets an index partition, built with `HashingEmbedder` (no model
load; the vectors' size and the rebuild cost do not depend on the model), and every
table gets a checkpoint. Then the org's steward forgets the subject and purges.

Reported: the purge's wall time (rewrites, file deletion, the org00 partition rebuild,
cache drop and the byte-scan verification, all included) and what it reclaimed; the
forget's time; and, measured again on their own afterwards, a scan of every file for
one value (index payloads included) and the partition rebuild, to show where the
purge's time goes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deltalake import DeltaTable

import memory_lakehouse as ml
from memory_lakehouse.bench import ATTRIBUTES, T0, WORDS, bench_root, ingest, peak_rss_mb
from memory_lakehouse.forget import scan_for
from memory_lakehouse.records import KINDS

SUBJECT = "customer-728"
CANARY = "CANARYBENCHQZXWVK"
MIXED = 4_000


def du(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def build(root: Path, records: int) -> ml.MemoryStore:
    store = ml.open(root, clock=lambda: T0 + timedelta(days=400), embedder=ml.HashingEmbedder())
    ingest(store, records - MIXED)
    steward = ml.Principal("steward-org00", ml.Scope("org00"), role="steward")
    rng = random.Random(11)
    for batch in range(MIXED // 1000):
        rows = [
            ml.Fact(
                f"user:mixed-{batch}-{i}",
                ATTRIBUTES[i % len(ATTRIBUTES)],
                " ".join(rng.choice(WORDS) for _ in range(6)),
                T0 + timedelta(minutes=i),
                source="bench@v1",
                evidence=f"evt:mixed-{batch}-{i}",
                scope=ml.Scope("org00", "support", f"team{i % 5}"),
            )
            for i in range(990)
        ]
        rows += [
            ml.Fact(
                SUBJECT,
                f"note_{batch}_{i}",
                f"{CANARY} private detail {batch} {i}",
                T0,
                source="bench@v1",
                evidence=f"evt:{CANARY}-{batch}-{i}",
                scope=ml.Scope("org00", "support", "team1"),
            )
            for i in range(10)
        ]
        rng.shuffle(rows)
        store.write_many(rows, by=steward)
    return store


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--store", help="where to build the store, kept (default: a temp dir, removed after the run)")
    args = parser.parse_args(argv)
    with bench_root(args.store, "memlake-purge-") as where:
        out = measure(Path(where) / "store", args.records)
    json.dump(out, sys.stdout, indent=2, default=str)
    print()


def measure(root: Path, records: int) -> dict:
    """Build the store at *root*, forget the subject, purge, and time each step."""
    out: dict = {
        "records": records,
        "store": str(root),
        "embedder": "HashingEmbedder(dim=256)",
        "subject_rows": 10 * (MIXED // 1000),
    }

    t = time.perf_counter()
    store = build(root, records)
    out["ingest_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    out["index_partitions"] = len(store.rebuild_index())
    out["index_build_seconds"] = round(time.perf_counter() - t, 2)
    for kind in KINDS:
        DeltaTable(str(root / kind)).create_checkpoint()
    out["store_bytes_before"] = du(root)

    steward = ml.Principal("dpo", ml.Scope("org00"), role="steward")
    t = time.perf_counter()
    forgotten = store.forget(SUBJECT, by=steward, reason="erasure request")
    out["forget_ms"] = round((time.perf_counter() - t) * 1000, 1)
    out["forget_records"] = len(forgotten.record_ids)

    t = time.perf_counter()
    report = store.purge(by=steward)
    out["purge_seconds"] = round(time.perf_counter() - t, 2)
    out["purge"] = {k: v for k, v in report.to_dict().items() if k not in ("leftovers",)}
    out["store_bytes_after"] = du(root)
    out["store_bytes_reclaimed"] = out["store_bytes_before"] - out["store_bytes_after"]

    # where the time goes, measured again on their own
    t = time.perf_counter()
    leftovers = scan_for(root, {CANARY})
    out["full_scan_one_value_seconds"] = round(time.perf_counter() - t, 2)
    out["canary_files_after"] = len(leftovers)
    t = time.perf_counter()
    store.rebuild_index("org00")
    out["partition_rebuild_org00_seconds"] = round(time.perf_counter() - t, 2)
    out["peak_rss_mb"] = peak_rss_mb()
    return out


if __name__ == "__main__":
    main()
