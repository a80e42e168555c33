"""Measure the HNSW index on this machine and print JSON (nothing is asserted).

    .venv/bin/python scripts/bench_index.py            # 100k x 384, ~2 minutes on 2 cores
    .venv/bin/python scripts/bench_index.py --n 20000  # quicker

Random unit vectors are the hard case for HNSW (no cluster structure), so recall here is
a floor. Reported: build throughput, query p50/p99 for k=8 unfiltered and with 1% and
0.1% allowed sets (the planner's choice, and forced HNSW for comparison), recall@k of the
unfiltered HNSW path against exact, the allowed-set size where exact stops beating the
filtered walk at two partition sizes (what `EXACT_SCALE` is fitted from), incremental add of 1,000 vectors,
save/load times, and resident memory.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lakehouse.index import EXACT_SCALE, IndexTag, Partition, exact_scan_limit


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(fn, queries: np.ndarray, reps: int) -> dict:
    ms = []
    for i in range(reps):
        t = time.perf_counter()
        fn(queries[i % len(queries)])
        ms.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3)}


def rss_mb() -> float | None:
    try:
        import psutil

        return round(psutil.Process().memory_info().rss / 2**20, 1)
    except ImportError:
        return None


def low_rank_recall(rng: np.random.Generator, n: int, dim: int, k: int) -> dict:
    """Recall on vectors with low intrinsic dimension (rank 32 + noise), closer to text embeddings.

    Uniform random 384-d vectors have no neighbourhood structure, so HNSW recall on them
    is a worst case; this shows what the same settings do on structured data.
    """
    x = rng.standard_normal((n, 32), dtype=np.float32) @ rng.standard_normal((32, dim), dtype=np.float32)
    x += 0.5 * rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rid = [f"lr_{i}" for i in range(n)]
    part = Partition.create(dim, capacity=n)
    part.add(rid, x, num_threads=2)
    qs = x[rng.choice(n, 100, replace=False)] + 0.3 * unit(rng, 100, dim)
    out: dict = {"n": n}
    for ef in (64, 128):
        hits = 0
        for q in qs:
            truth = {r for r, _ in part.search(q, k, plan="exact")}
            hits += len(truth & {r for r, _ in part.search(q, k, plan="hnsw", ef=ef)})
        out[f"ef={ef}"] = round(hits / (100 * k), 3)
    for frac in (0.05, 0.2):
        mask = part.mask({rid[i] for i in rng.choice(n, int(n * frac), replace=False)})
        hits = 0
        for q in qs:
            truth = {r for r, _ in part.search(q, k, allowed=mask, plan="exact")}
            hits += len(truth & {r for r, _ in part.search(q, k, allowed=mask, plan="hnsw")})
        out[f"filtered_{frac:.0%}_hnsw_ef=64"] = round(hits / (100 * k), 3)
    return out


def crossover(part: Partition, ids: list[str], rng: np.random.Generator, queries: np.ndarray, k: int) -> dict:
    """Allowed-set sizes where the exact scan stops beating the filtered walk.

    Both paths get a precomputed mask, so this compares the searches alone; turning ids
    into the mask costs the same on either path and is reported beside them.
    """
    n = len(part)
    curve = []
    first = None
    for count in (250, 500, 1000, 2000, 4000, 6000, 8000, 10000, 12000, 16000, 24000, 32000, 50000):
        if count >= n:
            break
        allowed = {ids[i] for i in rng.choice(n, count, replace=False)}
        mask = part.mask(allowed)
        exact = timed(lambda q, mask=mask: part.search(q, k, allowed=mask, plan="exact"), queries, 60)
        hnsw = timed(lambda q, mask=mask: part.search(q, k, allowed=mask, plan="hnsw"), queries, 60)
        build = timed(lambda q, allowed=allowed: part.mask(allowed), queries, 30)
        truth = [{r for r, _ in part.search(q, k, allowed=mask, plan="exact")} for q in queries[:30]]
        hits = sum(
            len(t & {r for r, _ in part.search(q, k, allowed=mask, plan="hnsw")})
            for t, q in zip(truth, queries, strict=False)
        )
        curve.append(
            {
                "allowed": count,
                "exact_p50_ms": exact["p50_ms"],
                "hnsw_filter_p50_ms": hnsw["p50_ms"],
                "hnsw_filter_recall": round(hits / (30 * k), 3),
                "ids_to_mask_p50_ms": build["p50_ms"],
            }
        )
        if first is None and hnsw["p50_ms"] < exact["p50_ms"]:
            first = count
    return {
        "curve": curve,
        "first_count_where_hnsw_wins": first,
        "scale_fit": None if first is None else round(first / n**0.5, 1),
        "planner_limit_now": exact_scan_limit(n),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n, dim, k = args.n, args.dim, args.k
    rng = np.random.default_rng(args.seed)
    out: dict = {
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "n": n,
        "dim": dim,
        "k": k,
        "exact_limit_in_code": {"scale": EXACT_SCALE, f"at_n={n}": exact_scan_limit(n)},
    }

    ids = [f"rec_{i:08d}" for i in range(n)]
    data = unit(rng, n, dim)
    queries = unit(rng, 200, dim)
    rss0 = rss_mb()

    part = Partition.create(dim, capacity=n)
    t = time.perf_counter()
    part.add(ids, data, num_threads=2)
    build_s = time.perf_counter() - t
    del data  # from here on RSS is the partition (graph + one float32 copy) and the ids
    out["build"] = {
        "seconds": round(build_s, 2),
        "vectors_per_s": round(n / build_s),
        "num_threads": 2,
        "M": part.M,
        "ef_construction": part.ef_construction,
    }
    out["rss_mb"] = {"before_build": rss0, "after_build": rss_mb()}

    # recall of the plain HNSW path against the exact answer, and what ef buys
    truths = [{r for r, _ in part.search(q, k, plan="exact")} for q in queries[:100]]
    recall = {}
    for ef in (64, 128, 256):
        hits = sum(
            len(t & {r for r, _ in part.search(q, k, plan="hnsw", ef=ef)})
            for t, q in zip(truths, queries, strict=False)
        )
        recall[f"ef={ef}"] = {
            "recall_at_k": round(hits / (100 * k), 3),
            **timed(lambda q, ef=ef: part.search(q, k, plan="hnsw", ef=ef), queries, 100),
        }
    out["unfiltered_recall_vs_ef"] = recall

    queries_out: dict = {"unfiltered_hnsw": timed(lambda q: part.search(q, k), queries, args.reps)}
    for label, frac in (("1%", 0.01), ("0.1%", 0.001)):
        allowed = {ids[i] for i in rng.choice(n, max(1, int(n * frac)), replace=False)}
        plans: list[str] = []
        part.search(queries[0], k, allowed=allowed, trace=plans.append)
        queries_out[f"allowed_{label}"] = {
            "allowed": len(allowed),
            "planner": plans[-1],
            **timed(lambda q, allowed=allowed: part.search(q, k, allowed=allowed), queries, args.reps),
            "forced_hnsw_filter": timed(
                lambda q, allowed=allowed: part.search(q, k, allowed=allowed, plan="hnsw"), queries, 30
            ),
        }
    big = {ids[i] for i in rng.choice(n, n // 2, replace=False)}
    big_mask = part.mask(big)
    queries_out["allowed_50%"] = {
        "allowed": len(big),
        "ids": timed(lambda q: part.search(q, k, allowed=big), queries, 30),
        "precomputed_mask": timed(lambda q: part.search(q, k, allowed=big_mask), queries, args.reps),
    }
    out["query_k8"] = queries_out

    out["exact_vs_hnsw_filter"] = {f"n={n}": crossover(part, ids, rng, queries, k)}
    small = min(n // 5, 20_000)
    if small >= 2_000:
        sub = Partition.create(dim, capacity=small)
        sub.add(ids[:small], unit(rng, small, dim), num_threads=2)
        out["exact_vs_hnsw_filter"][f"n={small}"] = crossover(sub, ids[:small], rng, queries, k)
        del sub

    # incremental adds: the first one past capacity also grows the index (doubling)
    adds = {}
    for name in ("first_1000_ms_with_growth", "next_1000_ms"):
        extra = unit(rng, 1000, dim)
        t = time.perf_counter()
        part.add([f"{name}_{i:06d}" for i in range(1000)], extra, num_threads=2)
        adds[name] = round((time.perf_counter() - t) * 1000, 1)
    adds["capacity_after"] = part.capacity
    out["incremental_add"] = adds
    out["rss_mb"]["after_adds"] = rss_mb()

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "p"
        tag = IndexTag("bench-model", dim, {"facts": 1}, len(part))
        t = time.perf_counter()
        part.save(target, tag)
        save_s = time.perf_counter() - t
        size = sum(f.stat().st_size for f in target.iterdir())
        t = time.perf_counter()
        loaded = Partition.load(target)
        load_s = time.perf_counter() - t
        out["persist"] = {
            "save_s": round(save_s, 2),
            "load_s": round(load_s, 2),
            "disk_mb": round(size / 2**20, 1),
            "loaded_ok": loaded is not None,
        }
    out["low_rank_recall"] = low_rank_recall(rng, min(n, 20_000), dim, k)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
