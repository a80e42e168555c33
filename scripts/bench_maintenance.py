"""Per-append cost as a store's commits accumulate, with and without maintenance (JSON; nothing asserted).

    .venv/bin/python scripts/bench_maintenance.py                     # 10,000 commits each way
    .venv/bin/python scripts/bench_maintenance.py --commits 2000      # quicker

One store per mode, written the way an agent writes: one `store.write` of one fact per
turn, in four orgs in turn, a simulated clock one minute per turn. ``plain`` runs with
the maintenance policy off (``MaintenancePolicy(None, None)``); ``maintained`` with
``MaintenancePolicy(every_commits=N)`` (default 500, the library's default), which runs in
a thread of its own; ``maintained-inline`` the same inside the append that made it due
(``background=False``), with the checkpoint every tenth version in the append too
(``Lake.background_checkpoints = False``; ask for it with ``--modes``). Reported per
mode, at 10, 1k and 10k commits: the p50 / p90 of the appends in a window of 40 around
that point (appends that ran the policy are counted apart: their own cost is the
compaction), the mean CPU per append in each tenth of the run (the trend, less noisy
than a window), the mean, p99, p99.9 and slowest five over every append including the policy's runs (what a
caller waits for), and the same mean in process CPU time (all threads: far steadier than
wall time on a shared machine), files and log
files in the fact table, and the time a fresh process takes to open the store.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memory_lakehouse as ml

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ORGS = 4
WINDOW = 40
OPEN = (
    "import sys, time; t = time.perf_counter(); import memory_lakehouse as ml; "
    "s = ml.open(sys.argv[1], embedder=ml.HashingEmbedder(), create=False); "
    "print(round((time.perf_counter() - t) * 1000, 1))"
)


def tombstones_in_checkpoint(table: Path) -> int | None:
    """Remove actions (tombstones) in the newest checkpoint of *table*: state every commit carries."""
    import pyarrow.parquet as pq

    checkpoints = sorted((table / "_delta_log").glob("*.checkpoint.parquet"))
    if not checkpoints:
        return None
    removes = pq.read_table(checkpoints[-1], columns=["remove"]).column("remove")
    return len(removes) - removes.null_count


def set_table_properties(root: Path, properties: dict[str, str]) -> None:
    """Create the store's tables, then set Delta *properties* on each (an operator's ALTER TABLE)."""
    from deltalake import DeltaTable

    ml.open(root, embedder=ml.HashingEmbedder()).close()
    for log in sorted(root.glob("*/_delta_log")):
        DeltaTable(str(log.parent)).alter.set_table_properties(properties)


def run(
    root: Path,
    commits: int,
    policy: ml.MaintenancePolicy,
    marks: list[int],
    properties: dict[str, str],
    slots: int = 997,
) -> dict:
    if properties:
        set_table_properties(root, properties)
    now = [T0]
    store = ml.open(root, clock=lambda: now[0], embedder=ml.HashingEmbedder(), maintenance=policy)
    # "maintained-inline" is how a store ran before either moved off the append: the policy and
    # the checkpoint every tenth version inside the append that makes them due
    store.lake.background_checkpoints = policy.background
    writers = [ml.Principal(f"agent{o}", ml.Scope(f"org{o}"), role="curator") for o in range(ORGS)]
    times: list[float] = []
    cpu: list[float] = []  # process CPU time (all threads): far less sensitive to a loaded machine than wall time
    maintained: set[int] = set()
    for n in range(commits):
        now[0] = T0 + timedelta(minutes=n)
        before = len(store.lake.views["fact"].commits)
        who = writers[n % ORGS]
        t, c = time.perf_counter(), time.process_time()
        store.write(ml.Fact(f"user:{n % slots}", "plan", f"plan {n % 13}", now[0], source="bench@v1"), by=who)
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        if not policy.background and len(store.lake.views["fact"].commits) > before + 1:
            maintained.add(n)  # the policy ran inside this append
    store.maintenance.wait()
    ordered = sorted(times)
    out: dict = {
        "mean_ms_all_appends": round(statistics.fmean(times), 2),
        "mean_cpu_ms_all_appends": round(statistics.fmean(cpu), 2),
        # what a caller waits for, policy runs included: the tail is where an inline run shows
        "p99_ms_all_appends": round(ordered[int(len(ordered) * 0.99)], 2),
        "p999_ms_all_appends": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))], 2),
        "slowest_ms": [round(t, 1) for t in ordered[-5:]],
        "policy_runs_inline": len(maintained),
        "compactions_of_fact": sum(1 for c in store.lake.commits() if c.table == "fact" and c.operation == "optimize"),
        "policy_run_ms_p50": round(statistics.median([times[i] for i in maintained]), 1) if maintained else None,
    }
    for mark in marks:
        lo, hi = max(0, mark - WINDOW // 2), min(commits, mark + WINDOW // 2)
        window = sorted(times[i] for i in range(lo, hi) if i not in maintained)
        spent = sorted(cpu[i] for i in range(lo, hi) if i not in maintained)
        out[f"at_{mark}"] = {
            "p50_ms": round(window[len(window) // 2], 2),
            "p90_ms": round(window[int(len(window) * 0.9)], 2),
            "cpu_p50_ms": round(spent[len(spent) // 2], 2),
        }
    # the trend the marks sample: mean CPU per append in each tenth of the run (policy runs apart)
    step = max(1, commits // 10)
    out["cpu_mean_ms_by_tenth"] = [
        round(statistics.fmean([cpu[i] for i in range(lo, min(commits, lo + step)) if i not in maintained] or [0.0]), 2)
        for lo in range(0, commits, step)
    ]
    status = store.maintenance.status().tables["fact"]
    out["fact_files"], out["fact_log_files"], out["fact_version"] = status.files, status.log_files, status.version
    out["fact_tombstones_in_checkpoint"] = tombstones_in_checkpoint(root / "fact")
    store.close()
    opened = subprocess.run([sys.executable, "-c", OPEN, str(root)], capture_output=True, text=True, check=True)
    out["open_ms_fresh_process"] = float(opened.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=500, help="the maintained store's every_commits")
    parser.add_argument("--modes", default="plain,maintained")
    parser.add_argument(
        "--slots",
        type=int,
        default=997,
        help="how many slots the writes cycle over: the first that many appends create a slot, every later one "
        "supersedes one (a reconcile lookup), so a smaller number makes the whole run supersessions",
    )
    parser.add_argument(
        "--tombstone-retention",
        default=None,
        help="set the tables' delta.deletedFileRetentionDuration (e.g. 'interval 2 minutes'): a run compresses "
        "weeks of commits into minutes, so the default week keeps every tombstone it makes",
    )
    parser.add_argument(
        "--log-retention",
        default=None,
        help="set the tables' delta.logRetentionDuration (e.g. 'interval 1 minute'; the store keeps 100 years): "
        "a checkpoint then deletes the commit files older than that, which `_commits` already holds",
    )
    args = parser.parse_args(argv)
    marks = [m for m in (10, 1_000, 10_000) if m <= args.commits] or [args.commits]
    if args.commits not in marks:
        marks.append(args.commits)
    policies = {
        "plain": ml.MaintenancePolicy(None, None),
        "maintained": ml.MaintenancePolicy(every_commits=args.every, every_bytes=None),  # in the background
        "maintained-inline": ml.MaintenancePolicy(every_commits=args.every, every_bytes=None, background=False),
    }
    report: dict = {
        "commits": args.commits,
        "every_commits": args.every,
        "window": WINDOW,
        "tombstone_retention": args.tombstone_retention,
        "log_retention": args.log_retention,
        "slots": args.slots,
    }
    properties = {
        name: value
        for name, value in (
            ("delta.deletedFileRetentionDuration", args.tombstone_retention),
            ("delta.logRetentionDuration", args.log_retention),
        )
        if value is not None
    }
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            started = time.perf_counter()
            report[mode] = run(Path(tmp) / mode, args.commits, policies[mode], marks, properties, args.slots)
            report[mode]["seconds"] = round(time.perf_counter() - started, 1)
            print(json.dumps({mode: report[mode]}), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
