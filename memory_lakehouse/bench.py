"""Benchmark: store-cost figures as JSON (``memlake bench`` / ``scripts/bench.py``).

One workload of facts over 20 orgs (DESIGN.md § Performance budget): batched ingest,
single writes, exact-slot reads and recall at now and at a past basis, at 10k and 100k
records, and peak RSS. Figures are printed, never asserted: the machines are shared.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator, Optional, Sequence

from .records import Fact
from .scope import Principal, Scope

ORGS = [f"org{i:02d}" for i in range(20)]
ATTRIBUTES = ["plan", "region", "sso_provider", "billing_cycle", "seats", "support_tier", "language", "timezone"]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu enterprise starter pro team").split()
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def scope_for(i: int) -> Scope:
    """Mostly org/division/team rows; one in a thousand at a single actor's scope."""
    org = ORGS[i % len(ORGS)]
    if i % 1000 == 7:
        return Scope(org, "support", "tier2", "actor-7")
    return Scope(org, "support", f"team{i % 5}") if i % 3 else Scope(org, "support")


def synthetic_facts(n: int, *, seed: int = 7, start: int = 0) -> Iterator[Fact]:
    rng = random.Random(seed + start)
    for i in range(start, start + n):
        yield Fact(f"user:{i // 4}", ATTRIBUTES[i % len(ATTRIBUTES)],
                   " ".join(rng.choice(WORDS) for _ in range(6)),
                   T0 + timedelta(minutes=i), source="bench@v1", evidence=f"evt:{i}", scope=scope_for(i))


def _pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _time(fn: Callable[[], Any], n: int) -> dict[str, float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": _pct(out, 0.5), "p99_ms": _pct(out, 0.99), "mean_ms": round(statistics.fmean(out), 3)}


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def ingest(store, n: int, *, start: int = 0, batch: int = 1000) -> float:
    """write_many in per-org batches of *batch*; returns records/s."""
    stewards = {org: Principal(f"steward-{org}", Scope(org), role="steward") for org in ORGS}
    records = list(synthetic_facts(n, start=start))
    by_org: dict[str, list[Fact]] = {}
    for r in records:
        by_org.setdefault(r.scope.org, []).append(r)
    t = time.perf_counter()
    for org, rows in by_org.items():
        for i in range(0, len(rows), batch):
            store.write_many(rows[i:i + batch], by=stewards[org])
    return round(n / (time.perf_counter() - t), 1)


def read_figures(store, n_records: int, rounds: int) -> dict[str, Any]:
    rng = random.Random(3)
    reader = Principal("reader", Scope("org03", "support", "team1"), role="member")
    actor = Principal("actor-7", Scope("org07", "support", "tier2", "actor-7"), role="member")
    past = T0 + timedelta(minutes=n_records // 2)

    def subject() -> str:
        i = rng.randrange(n_records)
        while ORGS[i % len(ORGS)] != "org03" or i % 3 not in (0, 1 if i % 5 == 1 else -1):
            i = rng.randrange(n_records)
        return f"user:{i // 4}"

    subjects = [subject() for _ in range(rounds)]
    it = iter(subjects * 4)
    queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(rounds)]
    qi = iter(queries * 8)
    return {
        "get_fact_now": _time(lambda: store.get_fact(next(it), "plan", by=reader), rounds),
        "get_fact_past": _time(lambda: store.get_fact(next(it), "plan", by=reader, as_of=past), rounds),
        "recall_now": _time(lambda: store.recall(next(qi), by=reader, kinds=["fact"]), max(5, rounds // 4)),
        "recall_past": _time(lambda: store.recall(next(qi), by=reader, kinds=["fact"], as_of=past), max(5, rounds // 4)),
        "recall_actor_scope": _time(lambda: store.recall(next(qi), by=actor, kinds=["fact"]), max(5, rounds // 4)),
    }


def run(records: int = 100_000, *, quick: bool = False, root: Optional[str] = None) -> dict[str, Any]:
    from .store import open as open_store

    root = root or tempfile.mkdtemp(prefix="memlake-bench-")
    store = open_store(root, clock=lambda: T0 + timedelta(days=400))
    rounds = 20 if quick else 100
    out: dict[str, Any] = {"records": records, "store": root}
    alice = Principal("alice", Scope("org00", "support", "tier2", "alice"), role="member")
    writes = [Fact(f"single:{i}", "plan", f"value {i}", T0, source="bench@v1") for i in range(rounds)]
    wi = iter(writes)
    out["single_write"] = _time(lambda: store.write(next(wi), by=alice), rounds)
    checkpoints = sorted({min(10_000, records), records})
    done = 0
    for size in checkpoints:
        rate = ingest(store, size - done, start=done)
        done = size
        out[f"write_many_rps_batch1000_to_{size}"] = rate
        out[f"reads_at_{size}"] = read_figures(store, size, rounds)
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--store", help="where to build the store (default: a temp dir)")
    args = parser.parse_args(argv)
    json.dump(run(args.records, quick=args.quick, root=args.store), sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
