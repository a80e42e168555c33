"""Benchmark: store-cost figures as JSON (``memlake bench`` / ``scripts/bench.py``).

One workload of facts over 20 orgs (DESIGN.md § Performance budget): batched ingest,
single writes, exact-slot reads and recall at now and at a past basis, at 10k and 100k
records, and peak RSS (with ``--recall``, also of serving the built store from a fresh
process). Figures are printed, never asserted: the machines are shared.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import multiprocessing
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .arrow_pool import pool_in_use
from .progress import Progress, configure
from .records import Fact
from .scope import Principal, Scope

if TYPE_CHECKING:
    from .store import MemoryStore


def _org_of(record: Fact) -> str:
    """The org a synthetic fact is scoped to (every one of them names its scope)."""
    if record.scope is None:
        raise ValueError("synthetic facts are scoped")
    return record.scope.org


ORGS = [f"org{i:02d}" for i in range(20)]
ATTRIBUTES = ["plan", "region", "sso_provider", "billing_cycle", "seats", "support_tier", "language", "timezone"]
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu enterprise starter pro team"
).split()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def scope_for(i: int) -> Scope:
    """Mostly org/division/team rows; one in a thousand at a single actor's scope."""
    org = ORGS[i % len(ORGS)]
    if i % 1000 == 7:
        return Scope(org, "support", "tier2", "actor-7")
    return Scope(org, "support", f"team{i % 5}") if i % 3 else Scope(org, "support")


def synthetic_facts(n: int, *, seed: int = 7, start: int = 0) -> Iterator[Fact]:
    rng = random.Random(seed + start)
    for i in range(start, start + n):
        yield Fact(
            f"user:{i // 4}",
            ATTRIBUTES[i % len(ATTRIBUTES)],
            " ".join(rng.choice(WORDS) for _ in range(6)),
            T0 + timedelta(minutes=i),
            source="bench@v1",
            evidence=f"evt:{i}",
            scope=scope_for(i),
        )


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


#: The packages that do a run's work, whose versions a bench reports beside its figures.
REPORTED_PACKAGES = ("pyarrow", "numpy", "duckdb", "deltalake", "hnswlib", "bm25s")


def environment() -> dict[str, Any]:
    """What a run's figures depend on beside the code: Python, the versions of the packages that
    do the work (None for one not installed), the CPU and its cores.

    The same code ran ~40% slower on one day's machine than on the day before's (the floor's
    figures did not move: docs/performance.md, "Twenty-fifth round"), and the figures alone
    could not tell a slower machine, a package resolved to another version and a
    regression apart."""
    from importlib import metadata

    packages: dict[str, str | None] = {}
    for name in REPORTED_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"python": platform.python_version(), "packages": packages, "cpu": cpu, "cores": os.cpu_count()}


def own_peak_rss_mb() -> float:
    """This process image's peak RSS: ``VmHWM`` where /proc has it, else `peak_rss_mb`.

    In a child process ``ru_maxrss`` is no measure: Linux carries the parent's peak across
    fork and exec into it (a child of a 1 GB process reports at least 1 GB).

    Linux reports ``VmHWM`` as the greater of the peak it recorded (at unmaps) and the RSS
    at the reading; pages an allocator hands back with ``madvise`` leave no record, so a
    later reading can be lower than an earlier one (a serving run read 212.2 MB, then
    212.0; a 300 MB Arrow buffer freed: 363.6, then 363.4). The greatest reading so far is
    the peak.
    """
    global _greatest_reading
    reading = _vm_hwm_mb()
    _greatest_reading = max(_greatest_reading, peak_rss_mb() if reading is None else reading)
    return _greatest_reading


_greatest_reading = 0.0


def _vm_hwm_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def ingest(
    store: MemoryStore, n: int, *, start: int = 0, batch: int = 1000, clock: _ManualClock | None = None
) -> float:
    """write_many in per-org batches of *batch*; returns records/s of the write_many calls.

    Records are taken in windows of one batch per org, made one window at a time (a
    backfill reads its source in chunks too; a whole workload held in memory would make
    the garbage collector, not the store, the cost); only `write_many` is timed. With
    *clock*, each window is committed an hour after the last valid_from in it, so system
    time trails world time the way a real ingest does (and past bases see part of the store).
    """
    stewards = {org: Principal(f"steward-{org}", Scope(org), role="steward") for org in ORGS}
    window = batch * len(ORGS)
    # windows fall on multiples of *window* in the whole workload, whatever *start* is, so a
    # record's commit time depends only on its index (read_figures' past bases rely on it)
    cuts = [start] + list(range((start // window + 1) * window, start + n, window)) + [start + n]
    spent = 0.0
    for a, b in itertools.pairwise(cuts):
        chunk = list(synthetic_facts(b - a, start=a))
        if clock is not None:
            clock.now = max(clock.now, max(r.valid_from for r in chunk) + timedelta(hours=1))
        by_org: dict[str, list[Fact]] = {}
        for r in chunk:
            by_org.setdefault(_org_of(r), []).append(r)
        t = time.perf_counter()
        for org, rows in by_org.items():
            store.write_many(rows, by=stewards[org])
        spent += time.perf_counter() - t
    return round(n / spent, 1)


def visible_slots(n_records: int, rng: random.Random, count: int) -> list[tuple[str, str, int]]:
    """(subject, attribute, index) of facts the benchmark reader (org03/support/team1) can see."""
    out: list[tuple[str, str, int]] = []
    while len(out) < count:
        i = rng.randrange(n_records)
        if ORGS[i % len(ORGS)] == "org03" and i % 1000 != 7 and (i % 3 == 0 or i % 5 == 1):
            out.append((f"user:{i // 4}", ATTRIBUTES[i % len(ATTRIBUTES)], i))
    return out


def read_figures(store: MemoryStore, n_records: int, rounds: int) -> dict[str, Any]:
    """Exact-slot reads and recall at now and at past bases; hit rates say the reads found rows."""
    rng = random.Random(3)
    reader = Principal("reader", Scope("org03", "support", "team1"), role="member")
    actor = Principal("actor-7", Scope("org07", "support", "tier2", "actor-7"), role="member")
    slots = visible_slots(n_records, rng, rounds)
    found = {"now": 0, "past": 0, "after_write": 0}

    def fact_now(slot: tuple[str, str, int]) -> None:
        found["now"] += store.get_fact(slot[0], slot[1], by=reader) is not None

    window = 1000 * len(ORGS)  # ingest() commits a window of records an hour after its last valid_from

    def fact_past(
        slot: tuple[str, str, int],
    ) -> None:  # a past basis just after the slot's window was committed: known and valid then
        when = T0 + timedelta(minutes=(slot[2] // window + 1) * window, hours=2)
        found["past"] += store.get_fact(slot[0], slot[1], by=reader, as_of=when) is not None

    def fact_after_write(
        slot: tuple[str, str, int],
    ) -> float:  # every write changes the snapshot: the read runs the narrowed query
        t = time.perf_counter()
        found["after_write"] += store.get_fact(slot[0], slot[1], by=reader) is not None
        return time.perf_counter() - t

    it_now, it_past = iter(slots), iter(slots)
    queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(rounds)]
    qi = iter(queries * 8)
    pasts = iter([T0 + timedelta(minutes=rng.randrange(n_records // 4, n_records)) for _ in range(rounds)])
    fixed_past = T0 + timedelta(minutes=n_records // 2)
    few = max(5, rounds // 4)
    out = {
        "get_fact_now": _time(lambda: fact_now(next(it_now)), rounds),
        "get_fact_past": _time(lambda: fact_past(next(it_past)), rounds),
        "get_fact_now_after_a_write": _read_after_write(store, lambda i: fact_after_write(slots[i]), few),
        "recall_now": _time(lambda: store.recall(next(qi), by=reader, kinds=["fact"]), few),
        "recall_past_fixed_basis": _time(
            lambda: store.recall(next(qi), by=reader, kinds=["fact"], as_of=fixed_past), few
        ),
        "recall_past_varying_basis": _time(
            lambda: store.recall(next(qi), by=reader, kinds=["fact"], as_of=next(pasts)), few
        ),
        "recall_actor_scope": _time(lambda: store.recall(next(qi), by=actor, kinds=["fact"]), few),
    }
    out["get_fact_hit_rate"] = {k: round(v / (few if k == "after_write" else rounds), 3) for k, v in found.items()}
    return out


def _read_after_write(store: MemoryStore, read: Callable[[int], float], n: int) -> dict[str, float]:
    """Time *read* only, each time right after a single write elsewhere (no read result can be reused)."""
    writer = Principal("bench-writer", Scope("org19", "support"), role="member")
    out = []
    for i in range(n):  # a new slot each time: a duplicate would write nothing
        store.write(Fact(f"interleaved:{os.urandom(6).hex()}", "plan", f"value {i}", T0, source="bench@v1"), by=writer)
        out.append(read(i) * 1000)
    return {"p50_ms": _pct(out, 0.5), "p99_ms": _pct(out, 0.99), "mean_ms": round(statistics.fmean(out), 3)}


class _ManualClock:
    """A store clock the benchmark moves by hand (commits get distinct system times)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def recall_figures(
    store: MemoryStore, records: int, *, clock: _ManualClock, rounds: int = 200, k: int = 8
) -> dict[str, Any]:
    """Recall cost at *records* facts, with the embedding of queries measured apart.

    Ingests the workload in two halves a day apart (so an as-of read at the midpoint
    sees half the store) plus a 1% slice one principal alone can see, builds the index
    (`rebuild_index`), then times: query embedding (each query once, which also warms
    the query cache, so recall timings below exclude it); recall now, as of the
    midpoint, for a principal who sees 1% of its org's partition and one who sees
    nearly all of it, and about one subject; a raw hnswlib query on the largest partition (the floor is it plus the
    embedding); and catching up 1,000 rows written after the build.
    """
    import numpy as np

    org = "org03"
    broad, narrow = _readers(org)
    steward = Principal("bench-steward", Scope(org), role="steward")
    out: dict[str, Any] = {"records": records, "embedder": store.retriever.embedder.name, "k": k}
    peaks = out["peak_rss_mb_after"] = {}  # where the process's peak was reached

    half = records // 2
    rates = [ingest(store, half)]
    clock.now += timedelta(days=1)
    past = clock.now
    clock.now += timedelta(days=1)
    rates.append(ingest(store, records - half, start=half))
    per_org = records // len(ORGS)
    slice_ = [
        Fact(
            f"deal:{i}",
            ATTRIBUTES[i % len(ATTRIBUTES)],
            f"{WORDS[i % len(WORDS)]} deal term {i}",
            T0 + timedelta(minutes=i),
            source="bench@v1",
            scope=Scope(org, "sales", "deals"),
        )
        for i in range(max(1, per_org // 100))
    ]
    store.write_many(slice_, by=steward)
    clock.now += timedelta(days=1)
    out["ingest_rps"] = rates
    out["selective_slice"] = {"rows": len(slice_), "org_rows": per_org + len(slice_)}
    out["midpoint"] = past.isoformat()
    peaks["ingest"] = peak_rss_mb()

    started = time.perf_counter()
    orgs = store.rebuild_index()
    seconds = time.perf_counter() - started
    peaks["index_build"] = peak_rss_mb()
    indexed = sum(len(store.retriever.index.partition(o) or ()) for o in orgs)
    out["index_build"] = {
        "partitions": len(orgs),
        "rows": indexed,
        "seconds": round(seconds, 1),
        "rows_per_s": round(indexed / seconds, 1),
    }

    rng = random.Random(11)
    queries = _queries(rng, rounds)
    retriever = store.retriever
    qi = iter(queries)
    out["query_embedding"] = _time(lambda: retriever.embed_query(next(qi)), rounds)  # cold: each query once

    def timed(who: Principal, **kw: Any) -> dict[str, Any]:
        lines: list[str] = []
        with store.tracer(lambda line: lines.append(line)):
            store.recall(queries[0], by=who, kinds=["fact"], k=k, **kw)  # warm: BM25 model, partition load
        it = iter(queries * 2)
        figures: dict[str, Any] = dict(_time(lambda: store.recall(next(it), by=who, kinds=["fact"], k=k, **kw), rounds))
        figures["planner"] = next((ln for ln in lines if ln.startswith(("exact scan", "hnsw"))), None)
        visible = next((ln for ln in lines if ln.startswith("visible fact")), "")
        figures["visible"] = int(visible.split(":")[1].split()[0]) if visible else None
        return figures

    out["recall_now"] = timed(broad)
    out["recall_as_of_midpoint"] = timed(broad, as_of=past)
    out["recall_selective_1pct"] = timed(narrow)
    out["recall_one_subject"] = timed(broad, subject=f"user:{(3 + 20 * 7) // 4}")  # a subject with a row in org03
    peaks["recall"] = peak_rss_mb()

    parts = {o: store.retriever.index.partition(o) for o in orgs}
    largest_org, largest = max(parts.items(), key=lambda p: len(p[1] or ()))
    vectors = [retriever.embed_query(q).astype(np.float32) for q in queries]
    if largest is None:
        raise RuntimeError("the benchmark store has no index partition")
    with largest._lock:
        raw = largest._graph()  # read back from its file if a rebuild let go of it
    raw.set_ef(64)
    vi = iter(vectors)
    out["raw_hnswlib_query"] = {
        "org": largest_org,
        "vectors": len(largest),
        **_time(lambda: raw.knn_query(next(vi), k=k, num_threads=1), rounds),
    }
    out["floor_ms"] = round(out["query_embedding"]["p50_ms"] + out["raw_hnswlib_query"]["p50_ms"], 3)

    new = [
        Fact(
            f"late:{i}",
            ATTRIBUTES[i % len(ATTRIBUTES)],
            " ".join(rng.sample(WORDS, 6)),
            T0 + timedelta(minutes=i),
            source="bench@v1",
            scope=Scope(org, "support", "team1"),
        )
        for i in range(1000)
    ]
    store.write_many(new, by=steward)  # team1: the next recall's partition sync must embed them all
    started = time.perf_counter()
    store.retriever.sync(org)
    catch_up = time.perf_counter() - started
    started = time.perf_counter()
    store.recall(queries[1], by=broad, kinds=["fact"], k=k)
    first = time.perf_counter() - started
    it = iter(queries * 2)
    out["catch_up_1000_rows"] = {
        "sync_ms": round(catch_up * 1000, 1),
        "first_recall_after_ms": round(first * 1000, 1),
        "recall_after": _time(lambda: store.recall(next(it), by=broad, kinds=["fact"], k=k), max(5, rounds // 4)),
    }
    return out


def _readers(org: str) -> tuple[Principal, Principal]:
    """The recall bench's readers: one who sees all of the org's facts, one who sees its 1% slice."""
    team = f"team{ORGS.index(org) % 5}"  # all of an org's facts sit in one team, or above it (scope_for)
    broad = Principal("reader", Scope(org, "support", team), role="member")
    narrow = Principal("seller", Scope(org, "sales", "deals", "seller"), role="member")  # only the 1% slice
    return broad, narrow


def _queries(rng: random.Random, n: int) -> list[str]:
    queries: list[str] = []
    while len(queries) < n:
        q = " ".join(rng.sample(WORDS, 3))
        if q not in queries:
            queries.append(q)
    return queries


def serving_figures(
    root: str, *, now: datetime, midpoint: datetime, embedder: str = "default", rounds: int = 200, k: int = 8
) -> dict[str, Any]:
    """Serve recall from the store `recall_figures` built, and report this process's peak RSS.

    Meant for a fresh process (`in_fresh_process`): its peak is then what serving costs —
    the store opened, the model loaded, the partition the reads use loaded from disk —
    without the ingest and the index build. Runs the recall bench's reads (now, as of the
    midpoint, the 1% reader; each query embedded on first use), then one recall in every
    org, which loads the whole index: ``peak_rss_all_orgs_mb``.
    """
    from .store import open as open_store

    store = open_store(root, clock=_ManualClock(now), embedder=_embedder(embedder))
    broad, narrow = _readers("org03")
    queries = _queries(random.Random(11), rounds)
    out: dict[str, Any] = {}
    for name, kw in (
        ("recall_now", {"by": broad}),
        ("recall_as_of_midpoint", {"by": broad, "as_of": midpoint}),
        ("recall_selective_1pct", {"by": narrow}),
    ):
        it = iter(queries)
        out[name] = _time(lambda it=it, kw=kw: store.recall(next(it), kinds=["fact"], k=k, **kw), rounds)  # type: ignore[misc]  # defaults bind the loop
    out["recall_now"]["note"] = "includes embedding each query (once)"
    out["peak_rss_mb"] = own_peak_rss_mb()
    for org in ORGS:
        store.recall(queries[0], by=_readers(org)[0], kinds=["fact"], k=k)
    out["peak_rss_all_orgs_mb"] = own_peak_rss_mb()
    store.close()
    return out


def _embedder(name: str) -> Any:
    """The bench's embedder by name: "hashing" (no model), else the store's default."""
    from .embed import HashingEmbedder

    return HashingEmbedder(dim=384) if name == "hashing" else None


def _no_bars() -> None:
    """A child process logs its long work: a bar of its own would draw over the parent's."""
    configure(bars=False)


def in_fresh_process(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a new interpreter (spawned: deltalake panics after a fork).

    *fn* must be importable by name, and the calling script must guard its entry point
    with ``if __name__ == "__main__"``: the new interpreter imports it again.
    """
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=_no_bars
    ) as pool:
        return pool.submit(fn, *args, **kwargs).result()


@contextmanager
def bench_root(root: str | None, prefix: str) -> Iterator[str]:
    """Where a bench builds its store: *root* as given (kept), or a temp dir removed when the
    run ends. A temp store was left behind by every run: 3.7 GB for a 1M tenants run, which
    filled this machine's disk after a few sessions of benches."""
    if root is not None:
        yield root
        return
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as temporary:
        yield temporary


def run(
    records: int = 100_000,
    *,
    quick: bool = False,
    root: str | None = None,
    recall: bool = False,
    embedder: str = "default",
) -> dict[str, Any]:
    """The single-reader figures (or with *recall*, the recall figures alone), on a store
    built at *root* (kept), or in a temp dir removed after the run."""
    with bench_root(root, "memlake-bench-") as where:
        return _run(records, quick=quick, root=where, recall=recall, embedder=embedder)


def _run(records: int, *, quick: bool, root: str, recall: bool, embedder: str) -> dict[str, Any]:
    from .store import open as open_store

    rounds = 20 if quick else 100
    if recall:  # the recall figures alone, on a store of their own
        with Progress("bench", total=2, unit="steps", enabled=True) as bar:
            bar.phase(f"recall figures at {records} records")
            clock = _ManualClock(T0 + timedelta(days=400))
            store = open_store(root, clock=clock, embedder=_embedder(embedder))
            figures = recall_figures(store, records, clock=clock, rounds=2 * rounds)
            store.close()
            out = {
                "records": records,
                "store": root,
                "arrow_pool": pool_in_use(),
                "environment": environment(),
                "recall": figures,
                "peak_rss_mb": peak_rss_mb(),
            }
            bar.advance()
            bar.phase("serving from a fresh process")
            serving = in_fresh_process(
                serving_figures,
                root,
                now=clock.now,
                midpoint=datetime.fromisoformat(figures["midpoint"]),
                embedder=embedder,
                rounds=2 * rounds,
            )
            bar.advance()
        out["peak_rss_serving_mb"] = serving["peak_rss_mb"]
        out["peak_rss_serving_all_orgs_mb"] = serving["peak_rss_all_orgs_mb"]
        out["serving"] = serving
        return out
    clock = _ManualClock(T0)
    store = open_store(root, clock=clock, embedder=_embedder(embedder))
    out = {
        "records": records,
        "store": root,
        "embedder": store.retriever.embedder.name,
        "arrow_pool": pool_in_use(),
        "environment": environment(),
    }
    alice = Principal("alice", Scope("org00", "support", "tier2", "alice"), role="member")
    writes = [Fact(f"single:{i}", "plan", f"value {i}", T0, source="bench@v1") for i in range(rounds)]
    wi = iter(writes)
    checkpoints = sorted({min(10_000, records), records})
    with Progress("bench", total=1 + 3 * len(checkpoints), unit="steps", enabled=True) as bar:
        bar.phase(f"{rounds} single writes")
        out["single_write"] = _time(lambda: store.write(next(wi), by=alice), rounds)
        bar.advance()
        done = 0
        for size in checkpoints:
            bar.phase(f"writing to {size} records")
            rate = ingest(store, size - done, start=done, clock=clock)
            done = size
            out[f"write_many_rps_batch1000_to_{size}"] = rate
            bar.advance()
            bar.phase(f"building the index at {size} records")
            store.rebuild_index()  # recall figures are store cost: the index is built first
            bar.advance()
            bar.phase(f"reads at {size} records")
            out[f"reads_at_{size}"] = read_figures(store, size, rounds)
            bar.advance()
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--store", help="where to build the store, kept (default: a temp dir, removed after the run)")
    parser.add_argument(
        "--recall",
        action="store_true",
        help="recall figures only: index build, recall p50/p99 without embedding, as-of, "
        "a 1%% visible set, catching up 1,000 rows; then peak RSS of serving the built "
        "store from a fresh process",
    )
    parser.add_argument(
        "--embedder",
        choices=("default", "hashing"),
        default="default",
        help="with --recall: the default model, or feature hashing for a quick run",
    )
    parser.add_argument(
        "--workload",
        choices=("store", "tenants"),
        default="store",
        help="store: the single-reader store and recall figures above; tenants: 20 orgs x 5 teams "
        "x 10 actors, each read by a new actor, beside the SQLite + numpy floor of scripts/",
    )
    parser.add_argument(
        "--read-cache-mb",
        type=int,
        default=None,
        help="with --workload tenants: the store's read_cache_bytes in MB (default: the store's "
        "own, 512): a small one shows a store bigger than its read caches",
    )
    args = parser.parse_args(argv)
    if args.workload == "tenants":
        from .bench_tenants import main as tenants_main

        cache = None if args.read_cache_mb is None else args.read_cache_mb * 2**20
        tenants_main(args.records, root=args.store, quick=args.quick, read_cache_bytes=cache)
        return
    if args.read_cache_mb is not None:
        parser.error("--read-cache-mb is an option of --workload tenants")
    json.dump(
        run(args.records, quick=args.quick, root=args.store, recall=args.recall, embedder=args.embedder),
        sys.stdout,
        indent=2,
    )
    print()


if __name__ == "__main__":
    main()
