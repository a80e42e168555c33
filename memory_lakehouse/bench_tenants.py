"""The multi-tenant workload (``memlake bench --workload tenants``), beside a hand-written floor.

Facts over 20 orgs x 5 teams x 10 actors: a fifth of the rows at an org's scope, two
fifths at a team's, two fifths at an actor's; one record in six (from the second batch
on) supersedes the slot of the record 1,000 before it (same scope, later valid_from):
20% of slots superseded. Ingest in batches of 1,000 records that mix every org, team
and actor, each record written by its own principal in one `store.batch()`; a batch
commits an hour after its last valid_from (system time trails world time).

Then, each read by a different actor (a principal the store has not served): recall
k = 8 now, as of the midpoint (one basis for every read) and as of a past basis of each
read's own, `get_fact`, and reads right after a write to the reader's own org; the
single-reader row repeats one actor (what `scripts/bench.py`
measures); 200 decisions replayed. Store cost only: every query is embedded once before
the clock starts, the embedder is feature hashing. The floor (``scripts/floor_sqlite.py``:
SQLite + numpy, loaded by path from a checkout) ingests the same rows and answers the
same searches in the same process. Figures are printed, never asserted.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .arrow_pool import pool_in_use
from .maintenance import MaintenancePolicy
from .progress import Progress
from .records import Fact, Preference
from .scope import Principal, Scope

if TYPE_CHECKING:
    from .write import WriteResult

ORGS = tuple(f"org{i:02d}" for i in range(20))
TEAMS = 5
ACTORS = 10
ATTRIBUTES = ("plan", "region", "sso_provider", "billing_cycle", "seats", "support_tier", "language", "timezone")
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu enterprise starter pro team"
).split()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 1000
#: A record this far back has the same org, team, actor and level (1000 = 20 * 5 * 10).
SUPERSEDE_BACK = 1000


def _place(i: int) -> tuple[str, str, str, int]:
    """(org, team, actor, level) of record *i*: level 0 org, 1-2 team, 3-4 actor.

    Every org gets every level; record ``i - SUPERSEDE_BACK`` has the same place."""
    return ORGS[i % 20], f"team{(i // 20) % TEAMS}", f"a{(i // 100) % ACTORS}", (i // 20 + 2 * (i // 100)) % 5


def _org_wide(i: int, work: Workload) -> bool:
    """Whether record *i* is its slot's first version and at its org's scope: a slot every
    actor of the org sees."""
    return _place(i)[3] == 0 and work.slot_of(i) == i


def _slot(i: int) -> tuple[str, str]:
    """The (subject, attribute) of record *i*'s slot (`Workload.record`)."""
    return f"user:{i // 8}", ATTRIBUTES[i % 8]


def scope_of(org: str, team: str, actor: str, level: int) -> Scope:
    if level == 0:
        return Scope(org)
    if level <= 2:
        return Scope(org, "support", team)
    return Scope(org, "support", team, f"{org}-{team}-{actor}")


def actor_principal(org: str, team: str, actor: str) -> Principal:
    return Principal(f"{org}-{team}-{actor}", Scope(org, "support", team, f"{org}-{team}-{actor}"), role="member")


class Workload:
    """Records by index, and the principal who writes each."""

    def __init__(self) -> None:
        self._writers: dict[tuple[str, str, str, int], Principal] = {}

    def slot_of(self, i: int) -> int:
        """The index whose slot record *i* writes (itself, or the one it supersedes)."""
        return i - SUPERSEDE_BACK if i % 6 == 5 and i >= SUPERSEDE_BACK else i

    def record(self, i: int) -> tuple[Fact, Principal, dict[str, Any]]:
        j = self.slot_of(i)
        org, team, actor, level = _place(j)
        rng = random.Random(i)
        value = " ".join(rng.choice(WORDS) for _ in range(6))
        subject, attribute = _slot(j)
        scope = scope_of(org, team, actor, level)
        valid_from = T0 + timedelta(minutes=i)
        fact = Fact(subject, attribute, value, valid_from, source="bench@v1", scope=scope)
        row = {
            "org": org,
            "team": scope.team,
            "actor": scope.actor,
            "subject": subject,
            "attribute": attribute,
            "value": value,
            "text": f"{subject} {attribute}: {value}",
            "valid_from": valid_from,
        }
        return fact, self.writer(org, team, actor, level), row

    def writer(self, org: str, team: str, actor: str, level: int) -> Principal:
        key = (org, team, actor, min(level, 1) if level < 3 else 3)
        p = self._writers.get(key)
        if p is None:
            if level == 0:
                p = Principal(f"steward-{org}", Scope(org), role="curator")
            elif level <= 2:
                p = Principal(f"lead-{org}-{team}", Scope(org, "support", team), role="curator")
            else:
                p = actor_principal(org, team, actor)
            self._writers[key] = p
        return p


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def _pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _stats(samples: Sequence[float], cpu: Sequence[float] = ()) -> dict[str, float]:
    out = {
        "p50_ms": _pct(samples, 0.5),
        "p99_ms": _pct(samples, 0.99),
        "mean_ms": round(statistics.fmean(samples), 3),
        "n": len(samples),
    }
    if cpu:  # CPU time of this process: what the call costs, less the waits for a shared machine's cores
        out.update(cpu_p50_ms=_pct(cpu, 0.5), cpu_p99_ms=_pct(cpu, 0.99))
    return out


def _timed(fn: Callable[[Any], Any], items: Sequence[Any]) -> tuple[dict[str, float], list[Any]]:
    out, cpu, results = [], [], []
    for item in items:
        c, t = time.process_time(), time.perf_counter()
        results.append(fn(item))
        out.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return _stats(out, cpu), results


def _proc_mb(field: str) -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def _reset_peak() -> None:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def load_floor(path: str | None = None) -> ModuleType | None:
    """scripts/floor_sqlite.py from a checkout (the floor is not part of the library)."""
    candidates = (
        [Path(path)]
        if path
        else [
            Path.cwd() / "scripts" / "floor_sqlite.py",
            Path(__file__).resolve().parents[1] / "scripts" / "floor_sqlite.py",
        ]
    )
    for candidate in candidates:
        if candidate.is_file():
            spec = importlib.util.spec_from_file_location("floor_sqlite", candidate)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


def _queries(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(WORDS, 3)) for _ in range(n)]


def _actors(rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    every = [(org, f"team{t}", f"a{a}") for org in ORGS for t in range(TEAMS) for a in range(ACTORS)]
    rng.shuffle(every)
    return (every * (n // len(every) + 1))[:n]


#: Seeds the past bases (and their actors) of the as-of figure where each read has a basis of its own.
OWN_BASES_SEED = 23


def _own_past_bases(records: int, n: int) -> list[datetime]:
    """*n* past bases over the later three quarters of the ingest (a record a minute), as replay's decisions."""
    rng = random.Random(OWN_BASES_SEED)
    return [T0 + timedelta(minutes=rng.randrange(records // 4, records)) for _ in range(n)]


def run_store(
    records: int, root: str, *, rounds: int = 200, k: int = 8, read_cache_bytes: int | None = None
) -> dict[str, Any]:
    from . import open as open_store
    from .embed import HashingEmbedder

    work = Workload()
    clock = _Clock(T0)
    _reset_peak()
    rss_before = _proc_mb("VmRSS")
    store = open_store(root, clock=clock, embedder=HashingEmbedder(dim=384), read_cache_bytes=read_cache_bytes)
    out: dict[str, Any] = {"records": records, "store": root, "embedder": store.retriever.embedder.name}
    first = actor_principal(ORGS[0], "team0", "a0")
    out["single_write_fresh_store"], _ = _timed(
        lambda i: store.write(Fact(f"single:{i}", "plan", f"value {i}", T0, source="bench@v1"), by=first),
        list(range(20)),
    )
    spent, spent_cpu, midpoint = 0.0, 0.0, None
    for start in range(0, records, BATCH):
        items = [work.record(i) for i in range(start, min(records, start + BATCH))]
        clock.now = max(clock.now, items[-1][0].valid_from + timedelta(hours=1))
        c, t = time.process_time(), time.perf_counter()
        with store.batch() as b:
            for fact, by, _ in items:
                b.write(fact, by=by)
        spent += time.perf_counter() - t
        spent_cpu += time.process_time() - c
        if midpoint is None and start + BATCH >= records // 2:
            midpoint = clock.now
    out["ingest_rps"] = round(records / spent, 1)
    out["ingest_rps_cpu"] = round(records / spent_cpu, 1)  # records per CPU-second of this process
    out["rss_after_ingest_mb"] = round(_proc_mb("VmHWM") - rss_before, 1)
    clock.now += timedelta(days=1)
    t = time.perf_counter()
    store.rebuild_index()
    out["index_build_s"] = round(time.perf_counter() - t, 1)
    assert midpoint is not None

    rng = random.Random(5)
    queries = _queries(rng, rounds * 4)
    for q in queries:
        store.retriever.embed_query(q)  # store cost only: every query embedded before the clock
    actors = _actors(rng, rounds * 3)
    readers = [actor_principal(*a) for a in actors]
    now_readers, past_readers, fact_readers = readers[:rounds], readers[rounds : 2 * rounds], readers[2 * rounds :]

    # a serving store has met each org before: its BM25 model is built and its partition loaded
    # (one recall per org by its steward, not timed); the readers below are all new to the store
    for org in ORGS:
        store.recall("warm up", by=Principal(f"steward-{org}", Scope(org), role="curator"), k=k)

    def recall(args: tuple[Principal, str, datetime | None]) -> list[Any]:
        who, q, as_of = args
        return store.recall(q, by=who, k=k, as_of=as_of)

    out["recall_now_new_actor"], now_hits = _timed(
        recall, [(p, q, None) for p, q in zip(now_readers, queries, strict=False)]
    )
    out["recall_as_of_midpoint_new_actor"], past_hits = _timed(
        recall, [(p, q, midpoint) for p, q in zip(past_readers, queries[rounds:], strict=False)]
    )
    # each query a new actor at a past basis of its own (an eval replaying decisions one at a
    # time, an audit of what was believed when): the midpoint figure asks one basis of every
    # read, which the org's heads remember after its first read there
    own_bases = _own_past_bases(records, rounds)
    own_readers = [actor_principal(*a) for a in _actors(random.Random(OWN_BASES_SEED + 1), rounds)]
    out["recall_as_of_own_past_basis_new_actor"], own_hits = _timed(
        recall, list(zip(own_readers, queries[rounds : 2 * rounds], own_bases, strict=True))
    )
    # A/B in the same process: the same kind of reads with the heads switched off (the per-reader
    # query for each kind, as before them), by actors of their own
    store.vis.use_heads = False
    ab = [actor_principal(*a) for a in _actors(random.Random(17), rounds // 4)]
    out["recall_now_new_actor_per_reader_query"], _ = _timed(
        recall, [(p, q, None) for p, q in zip(ab, queries[3 * rounds :], strict=False)]
    )
    store.vis.use_heads = True
    one = now_readers[0]
    out["recall_now_single_reader"], _ = _timed(recall, [(one, q, None) for q in queries[2 * rounds : 3 * rounds]])
    out["top_k_starved"] = sum(len(h) < k for h in now_hits + past_hits)
    out["as_of_leaks"] = sum(
        any((h.record.known_since or T0) > at or h.record.valid_from > at for h in hits)
        for hits, at in [(hits, midpoint) for hits in past_hits] + list(zip(own_hits, own_bases, strict=True))
    )

    def own_slot(who: Principal, i: int) -> tuple[str, str]:
        """A slot every actor of *who*'s org sees (`_org_wide`), picked at random."""
        o = ORGS.index(who.scope.org)
        pick = random.Random(i)
        while True:
            j = o + 20 * pick.randrange(max(1, records // 20))
            if _org_wide(j, work):
                return _slot(j)

    def get_fact(args: tuple[Principal, int]) -> Any:
        who, i = args
        subject, attribute = own_slot(who, i)
        return store.get_fact(subject, attribute, by=who)

    out["get_fact_new_actor"], facts = _timed(get_fact, list(zip(fact_readers, range(rounds), strict=True)))
    out["get_fact_hit_rate"] = round(sum(f is not None for f in facts) / len(facts), 3)

    samples: dict[str, tuple[list[float], list[float]]] = {}  # per figure: wall-clock and CPU ms

    def clocked(name: str, fn: Callable[[], Any]) -> None:
        c, t = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = samples.setdefault(name, ([], []))
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)

    def writes_then_reads(tag: str) -> None:
        """A write to the reader's own org, then the first read by another actor of that org."""
        for i in range(min(rounds, 50)):
            org = ORGS[i % 20]
            writer = actor_principal(org, "team0", "a0")
            reader = actor_principal(org, f"team{1 + i % 4}", f"a{i % ACTORS}")
            lead = Principal(f"lead-{org}", Scope(org), role="curator")

            def write(i: int = i, org: str = org, lead: Principal = lead) -> WriteResult:
                fresh = Fact(
                    f"fresh{tag}:{i}", "plan", f"value {i}", clock.now, source="bench@v1", scope=Scope(org, "support")
                )
                return store.write(fresh, by=lead)

            clocked(f"write{tag}", write)
            subject, attribute = own_slot(reader, i)
            clocked(f"get{tag}", partial(store.get_fact, subject, attribute, by=reader))
            store.write(Fact(f"fresh2{tag}:{i}", "plan", f"value {i}", clock.now, source="bench@v1"), by=writer)
            clocked(f"recall{tag}", partial(store.recall, queries[i], by=reader, k=k))

    writes_then_reads("")  # the default: each write takes its rows into what reads built (`catch_up`)
    # A/B in the same process: the same writes and reads with those steps left to the read
    store.catch_up = "read"
    writes_then_reads("-on-read")
    store.catch_up = "write"
    # a conversation's capture: the fact and the preference it yielded in one commit (a
    # transaction over two tables), then the first recall by a new actor of another org
    # and of the writer's own
    for i in range(min(rounds, 40)):
        org, other = ORGS[i % 20], ORGS[(i + 7) % 20]
        said = Scope(org, "support")
        lead = Principal(f"lead-{org}", Scope(org), role="curator")
        capture = [
            Fact(f"captured:{i}", "plan", f"value {i}", clock.now, source="bench@v1", scope=said),
            Preference(f"captured:{i}", "tone", f"tone {i}", clock.now, source="bench@v1", scope=said),
        ]
        clocked("mixed-write", partial(store.write_many, capture, by=lead))
        away = actor_principal(other, f"team{1 + i % 4}", f"mixed{i}")
        clocked("mixed-recall-other", partial(store.recall, queries[i], by=away, k=k))
        own = actor_principal(org, f"team{1 + i % 4}", f"mixed{i}")
        clocked("mixed-recall-own", partial(store.recall, queries[rounds + i], by=own, k=k))
    out.update(_agent_flows(store, clock, clocked, samples, rounds=min(rounds, 40)))
    out["write_many_fact_and_preference"] = _stats(*samples["mixed-write"])
    out["recall_first_after_mixed_kind_write_other_org"] = _stats(*samples["mixed-recall-other"])
    out["recall_first_after_mixed_kind_write_own_org"] = _stats(*samples["mixed-recall-own"])
    out["single_write_on_built_store"] = _stats(*samples["write"])
    out["single_write_on_built_store_catch_up_on_read"] = _stats(*samples["write-on-read"])
    out["get_fact_first_after_own_org_write_catch_up_on_read"] = _stats(*samples["get-on-read"])
    out["recall_first_after_own_org_write_catch_up_on_read"] = _stats(*samples["recall-on-read"])
    # A/B in the same process: the same writes with every append through delta-rs's writer
    # (`Lake.direct_appends` off), whose commit cost grows with the table's files
    store.lake.direct_appends = False
    out["single_write_on_built_store_through_delta_rs"], _ = _timed(
        lambda i: store.write(
            Fact(
                f"via-delta-rs:{i}",
                "plan",
                f"v {i}",
                clock.now,
                source="bench@v1",
                scope=Scope(ORGS[i % 20], "support"),
            ),
            by=Principal(f"lead-{ORGS[i % 20]}", Scope(ORGS[i % 20]), role="curator"),
        ),
        list(range(min(rounds, 50))),
    )
    store.lake.direct_appends = True
    out["get_fact_first_after_own_org_write"] = _stats(*samples["get"])
    out["recall_first_after_own_org_write"] = _stats(*samples["recall"])
    # many threads writing one record at a time (an agent serving many users), with the
    # store's group commit (`group.GroupCommit`) and without it, in the same process
    for enabled in (True, False):
        out[f"concurrent_writes_group_commit_{'on' if enabled else 'off'}"] = _concurrent_writes(
            store, clock.now, enabled=enabled, threads=WRITER_THREADS, each=max(5, rounds // 8)
        )

    # (after the concurrent writers, so the commits it adds do not move a maintenance run into
    # their phases) A/B in the same process: single writes with the
    # checkpoint every tenth version in the background (the default) and inside the append,
    # in alternating blocks of ten (one checkpoint each); mean and p99 show it, the p50 does not.
    # The maintenance policy is held off meanwhile: a run landing in one block (appends past the
    # commit gate's allowance wait for each partition's rewrite) showed as a 273 ms p99 of that block's mode
    by_mode: dict[bool, list[float]] = {True: [], False: []}
    policy = store.maintenance.policy
    store.maintenance.wait()
    store.maintenance.policy = MaintenancePolicy(None, None)
    for block in range(2 * max(1, min(rounds, 100) // 10)):
        background = block % 2 == 0
        store.lake.background_checkpoints = background
        store.lake.wait_for_checkpoints()
        for i in range(10):
            org = ORGS[(block * 10 + i) % 20]
            fresh = Fact(
                f"ckpt:{block}:{i}", "plan", f"v {i}", clock.now, source="bench@v1", scope=Scope(org, "support")
            )
            t = time.perf_counter()
            store.write(fresh, by=Principal(f"lead-{org}", Scope(org), role="curator"))
            by_mode[background].append((time.perf_counter() - t) * 1000)
    store.lake.background_checkpoints = True
    store.maintenance.policy = policy
    out["single_write_on_built_store_checkpoint_in_background"] = _stats(by_mode[True])
    out["single_write_on_built_store_checkpoint_in_the_append"] = _stats(by_mode[False])
    decisions = [
        (
            f"d{i}",
            readers[i % len(readers)],
            queries[i],
            None,
            T0 + timedelta(minutes=rng.randrange(records // 4, records)),
        )
        for i in range(rounds)
    ]
    t = time.perf_counter()
    result = store.replay(decisions)
    seconds = time.perf_counter() - t
    out["replay"] = {
        "decisions": rounds,
        "total_ms": round(seconds * 1000, 1),
        "ms_per_decision": round(seconds * 1000 / rounds, 3),
        "leaked_decisions": result.leaked_decisions,
        "visible_rows": result.visible.num_rows,
    }
    out["delta_rss_peak_mb"] = round(_proc_mb("VmHWM") - rss_before, 1)

    # Every figure above ran with an empty deletion ledger; a store serving customers has
    # erased some, and whatever asks the ledger about rows pays for it (the write path's
    # lookup, the heads advanced by a write). The same first reads after a write, and single
    # writes that supersede a slot, once a customer is forgotten (after the memory figure,
    # which stays comparable with the earlier runs)
    store.forget("user:0", by=Principal("dpo", Scope(ORGS[0]), role="steward"), reason="erasure request")
    # a new ledger state: each org's first reads rebuild what was built under the old one
    # (timed apart; they also warm the orgs again, as before the figures above)
    for org in ORGS:
        steward = Principal(f"steward-{org}", Scope(org), role="curator")
        clocked("get_after_forget", partial(store.get_fact, *own_slot(steward, 0), by=steward))
        clocked("recall_after_forget", partial(store.recall, "warm up", by=steward, k=k))
    actions: list[str] = []
    for i in range(min(rounds, 50)):
        org = ORGS[i % 20]
        reader = actor_principal(org, f"team{1 + i % 4}", f"a{(i + 3) % ACTORS}")
        lead = Principal(f"lead-{org}", Scope(org), role="curator")
        subject, attribute = own_slot(reader, rounds + i)  # at the org's scope: the lead's write supersedes it
        changed = Fact(subject, attribute, f"changed {i}", clock.now, source="bench@v1")

        def supersede(changed: Fact = changed, lead: Principal = lead) -> None:
            actions.append(store.write(changed, by=lead).action)

        clocked("supersede", supersede)
        clocked("get_ledger", partial(store.get_fact, *own_slot(reader, i), by=reader))
        store.write(Fact(f"fresh3:{i}", "plan", f"value {i}", clock.now, source="bench@v1"), by=lead)
        clocked("recall_ledger", partial(store.recall, queries[rounds + i], by=reader, k=k))
    out["single_write_superseding_with_a_forget_in_the_ledger"] = {
        **_stats(*samples["supersede"]),
        "superseded": actions.count("superseded"),
    }
    out["get_fact_first_after_own_org_write_with_a_forget_in_the_ledger"] = _stats(*samples["get_ledger"])
    out["recall_first_after_own_org_write_with_a_forget_in_the_ledger"] = _stats(*samples["recall_ledger"])
    out["get_fact_first_of_an_org_after_a_forget"] = _stats(*samples["get_after_forget"])
    out["recall_first_of_an_org_after_a_forget"] = _stats(*samples["recall_after_forget"])
    # what the read caches held at the end against their bound, and how often a read needed an
    # org's history and queried it: queries keeping pace with reads mean the bound is too small
    stats = store.read_cache_stats()
    out["read_cache"] = {
        "bound_mb": round(sum(dataclasses.astuple(stats.budget)) / 2**20, 1),
        "heads_mb": round(stats.heads_bytes / 2**20, 1),
        "histories_mb": round(stats.histories_bytes / 2**20, 1),
        "orgs_with_heads": stats.head_orgs,
        "orgs_with_histories": stats.history_orgs,
        "history_picks": stats.history_picks,
        "history_queries": stats.history_queries,
        "history_advances": stats.history_advances,
    }
    out["fact_rows_at_close"] = store.lake.all_rows("fact").num_rows
    out["clock_at_close"] = clock.now.isoformat()
    store.close()  # saves the index partitions written to since they were built: its peak counts too
    out["delta_rss_peak_through_close_mb"] = round(_proc_mb("VmHWM") - rss_before, 1)
    return out


def reopen(root: str, clock_at: str, *, k: int = 8) -> dict[str, Any]:
    """A service restarting on the store: open it, then the first `get_fact` and recall by
    actors new to it, each of an org not read yet, and a second recall. Run in a process of
    its own (`bench.in_fresh_process`): in the bench's process the open reuses the heap the
    store freed, and its memory would not show. Its Δ peak RSS includes the libraries'
    first use (~90 MB: the whole figure for a 2,000-record store).

    The ingest writes one small file per org and batch (20 a batch), and the default policy
    compacts a table after 500 commits: a 100k store ingested alone holds 2,000 files; the
    one a 100k run leaves holds ~330 (its single writes crossed 500 commits).
    """
    from . import open as open_store
    from .embed import HashingEmbedder

    clock = _Clock(datetime.fromisoformat(clock_at))
    out: dict[str, Any] = {}
    _reset_peak()
    rss_before = _proc_mb("VmRSS")
    t = time.perf_counter()
    store = open_store(root, clock=clock, embedder=HashingEmbedder(dim=384))
    store.lake.refresh()  # the snapshot read: what every first read would wait for
    out["open_s"] = round(time.perf_counter() - t, 2)
    out["fact_files"] = store.maintenance.status().tables["fact"].files
    out["fact_rows"] = store.lake.all_rows("fact").num_rows
    first, second, third = (actor_principal(org, "team1", "reopened") for org in ORGS[:3])
    # a slot org00's actors all see, not about the subject the run forgot (user:0)
    work = Workload()
    subject, attribute = _slot(next(j for j in range(0, 10**9, 20) if j // 8 and _org_wide(j, work)))
    found: list[Any] = []
    for name, read in (
        ("first_get_fact_ms", lambda: found.append(store.get_fact(subject, attribute, by=first))),
        ("first_recall_ms", partial(store.recall, "what plan is the customer on", by=second, k=k)),
        ("second_recall_ms", partial(store.recall, "when did the plan change", by=third, k=k)),
    ):
        t = time.perf_counter()
        read()
        out[name] = round((time.perf_counter() - t) * 1000, 1)
    out["delta_rss_peak_mb"] = round(_proc_mb("VmHWM") - rss_before, 1)
    out["first_get_fact_found"] = found[0] is not None
    store.close()
    return out


def compact(root: str, clock_at: str) -> int:
    """Compact the store at *root* (`Maintenance.compact`): what `reopen` meets once the
    maintenance policy has run. Returns the files removed."""
    from . import open as open_store
    from .embed import HashingEmbedder

    with open_store(root, clock=_Clock(datetime.fromisoformat(clock_at)), embedder=HashingEmbedder(dim=384)) as store:
        return store.maintenance.compact().files_removed


def _agent_flows(
    store: Any,
    clock: _Clock,
    clocked: Callable[[str, Callable[[], Any]], None],
    samples: dict[str, tuple[list[float], list[float]]],
    *,
    rounds: int,
) -> dict[str, Any]:
    """What an agent's other writes cost, and what the next reader of the org is served.

    Per round, in one org: an agent proposes a fact and a lead approves it; a new actor's
    first `get_fact` of it (it must be served the approved value); the lead retracts it; a
    new actor's first `get_fact` (it must be served nothing); and a capture of a four-turn
    conversation (the turns and what the rule extractor takes from them, waited for).
    The misses count reads that were served anything else: a fast path that skipped a
    retraction or an approval shows there, not only in the tests.
    """
    misses = {"approved_not_served": 0, "retracted_served": 0}

    def run(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result: list[Any] = []
        clocked(name, lambda: result.append(fn(*args, **kwargs)))
        return result[0]

    def captured(session: str, turns: list[dict[str, str]], **options: Any) -> Any:
        return store.capture(session, turns, **options).result()  # stored, extracted and reconciled

    for i in range(rounds):
        org = ORGS[i % 20]
        said = Scope(org)
        agent = Principal(f"agent-{org}", said, role="agent")
        lead = Principal(f"lead-{org}", said, role="curator")
        subject = f"flow:{i}"
        draft = Fact(subject, "plan", f"value {i}", clock.now, source="bench@v1", scope=said)
        proposed = run("flow-propose", store.propose, draft, by=agent)
        approved = run("flow-approve", store.approve, proposed.record_id, by=lead)
        reader = actor_principal(org, f"team{1 + i % 4}", f"flow{i}")
        served = run("flow-get-approved", store.get_fact, subject, "plan", by=reader)
        misses["approved_not_served"] += getattr(served, "value", None) != f"value {i}"
        run("flow-retract", store.retract, approved.record_id, by=lead, reason="bench: withdrawn")
        later = actor_principal(org, f"team{1 + i % 4}", f"flow-later{i}")
        misses["retracted_served"] += run("flow-get-retracted", store.get_fact, subject, "plan", by=later) is not None
        turns = [
            {"role": "user", "text": f"My name is Dana and I moved to Austin in round {i}."},
            {"role": "assistant", "text": "Thanks, noted."},
            {"role": "user", "text": "I prefer email over phone calls."},
            {"role": "assistant", "text": "Email it is."},
        ]
        run("flow-capture", captured, f"bench-flow-{i}", turns, by=lead, subject=f"user:flow{i}", scope=said)
    out: dict[str, Any] = {
        "propose_by_an_agent": _stats(*samples["flow-propose"]),
        "approve_by_a_lead": _stats(*samples["flow-approve"]),
        "get_fact_first_after_an_approval": _stats(*samples["flow-get-approved"]),
        "retract_by_a_lead": _stats(*samples["flow-retract"]),
        "get_fact_first_after_a_retraction": _stats(*samples["flow-get-retracted"]),
        "capture_of_four_turns": _stats(*samples["flow-capture"]),
    }
    out.update(misses)
    return out


#: Threads of the concurrent-writers figure: each writes one record at a time to an org of its own.
WRITER_THREADS = 8


def _concurrent_writes(store: Any, now: datetime, *, enabled: bool, threads: int, each: int) -> dict[str, Any]:
    """*threads* threads each writing *each* records one at a time; writes/s and each write's latency."""
    import threading

    store.group_commit.enabled = enabled
    groups, grouped = store.group_commit.groups, store.group_commit.grouped_writes
    latencies: list[float] = []
    lock = threading.Lock()
    tag = "on" if enabled else "off"

    def writer(t: int) -> None:
        org = ORGS[t % len(ORGS)]
        lead = Principal(f"lead-{org}", Scope(org), role="curator")
        mine = []
        for j in range(each):
            fact = Fact(
                f"concurrent-{tag}:{t}:{j}", "plan", f"value {j}", now, source="bench@v1", scope=Scope(org, "support")
            )
            started = time.perf_counter()
            store.write(fact, by=lead)
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - started
    store.group_commit.enabled = True
    return {
        "threads": threads,
        "writes": threads * each,
        "writes_per_s": round(threads * each / seconds, 1),
        "p50_ms": round(_pct(latencies, 0.5), 3),
        "p99_ms": round(_pct(latencies, 0.99), 3),
        "group_commits": store.group_commit.groups - groups,
        "grouped_writes": store.group_commit.grouped_writes - grouped,
    }


def run_floor(floor_module: ModuleType, records: int, *, rounds: int = 200, k: int = 8) -> dict[str, Any]:
    import numpy as np

    from .embed import HashingEmbedder

    embedder = HashingEmbedder(dim=384)
    work = Workload()
    _reset_peak()
    rss_before = _proc_mb("VmRSS")
    floor = floor_module.Floor()
    spent, spent_cpu, known, midpoint = 0.0, 0.0, T0, None
    for start in range(0, records, BATCH):
        rows = [work.record(i)[2] for i in range(start, min(records, start + BATCH))]
        vectors = embedder.embed([r["text"] for r in rows])  # embedding outside the clock, as for the store
        known = max(known, rows[-1]["valid_from"] + timedelta(hours=1))
        c, t = time.process_time(), time.perf_counter()
        floor.ingest(rows, vectors, known)
        spent += time.perf_counter() - t
        spent_cpu += time.process_time() - c
        if midpoint is None and start + BATCH >= records // 2:
            midpoint = known
    assert midpoint is not None
    now = known + timedelta(days=1)
    rng = random.Random(5)
    queries = _queries(rng, rounds * 4)
    qvecs = {q: np.asarray(v, dtype=np.float32) for q, v in zip(queries, embedder.embed(queries), strict=True)}
    actors = _actors(rng, rounds * 3)

    def search(args: tuple[tuple[str, str, str], str, datetime]) -> list[int]:
        (org, team, actor), q, at = args
        found: list[int] = floor.search(qvecs[q], org=org, team=team, actor=f"{org}-{team}-{actor}", at=at, k=k)
        return found

    out: dict[str, Any] = {"ingest_rps": round(records / spent, 1), "ingest_rps_cpu": round(records / spent_cpu, 1)}
    out["recall_now_new_actor"], _ = _timed(
        search, [(a, q, now) for a, q in zip(actors[:rounds], queries, strict=False)]
    )
    out["recall_as_of_midpoint_new_actor"], _ = _timed(
        search, [(a, q, midpoint) for a, q in zip(actors[rounds : 2 * rounds], queries[rounds:], strict=False)]
    )
    own_actors = _actors(random.Random(OWN_BASES_SEED + 1), rounds)
    out["recall_as_of_own_past_basis_new_actor"], _ = _timed(
        search, list(zip(own_actors, queries[rounds : 2 * rounds], _own_past_bases(records, rounds), strict=True))
    )
    out["delta_rss_peak_mb"] = round(_proc_mb("VmHWM") - rss_before, 1)
    return out


def _floor_memory_in_a_fresh_process(floor_path: str, records: int, rounds: int) -> float:
    """The floor's Δ peak RSS, run again in a spawned interpreter (`bench.in_fresh_process`).

    Run after the store in the store's process, the floor's arrays reuse the heap the
    store freed, so its RSS barely grows: that run measured 72 MB at 100k, a fresh
    process 350. Latencies stay from the run in the same process (same warm machine).
    """
    from .bench import in_fresh_process

    peak: float = in_fresh_process(_floor_peak_child, floor_path, records, rounds)
    return peak


def _floor_peak_child(floor_path: str, records: int, rounds: int) -> float:
    module = load_floor(floor_path)
    assert module is not None
    peak: float = run_floor(module, records, rounds=rounds)["delta_rss_peak_mb"]
    return peak


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}x" if a and b else "n/a"


def markdown(result: dict[str, Any]) -> str:
    """The figures as a table: wall-clock (CPU time of the process in brackets) and store / floor."""
    s, f = result["store"], result.get("floor") or {}

    def lat(side: dict[str, Any], name: str, q: str = "p50") -> tuple[float | None, float | None]:
        fig = side.get(name) or {}
        return fig.get(f"{q}_ms"), fig.get(f"cpu_{q}_ms")

    rows: list[tuple[str, tuple[float | None, float | None], tuple[float | None, float | None], bool]] = [
        (
            "ingest, 1,000-record batches mixing orgs (rec/s)",
            (s["ingest_rps"], s.get("ingest_rps_cpu")),
            (f.get("ingest_rps"), f.get("ingest_rps_cpu")),
            True,
        ),
        (
            "recall p50, each query a new actor (ms)",
            lat(s, "recall_now_new_actor"),
            lat(f, "recall_now_new_actor"),
            False,
        ),
        (
            "recall p99, each query a new actor (ms)",
            lat(s, "recall_now_new_actor", "p99"),
            lat(f, "recall_now_new_actor", "p99"),
            False,
        ),
        (
            "recall p50 as of the midpoint, new actor (ms)",
            lat(s, "recall_as_of_midpoint_new_actor"),
            lat(f, "recall_as_of_midpoint_new_actor"),
            False,
        ),
        (
            "recall p50 as of a past basis of its own, new actor (ms)",
            lat(s, "recall_as_of_own_past_basis_new_actor"),
            lat(f, "recall_as_of_own_past_basis_new_actor"),
            False,
        ),
        (
            "recall p50, new actor, heads off: per-reader query (ms)",
            lat(s, "recall_now_new_actor_per_reader_query"),
            (None, None),
            False,
        ),
        ("recall p50, single reader repeated (ms)", lat(s, "recall_now_single_reader"), (None, None), False),
        ("get_fact p50, new actor (ms)", lat(s, "get_fact_new_actor"), (None, None), False),
        (
            "get_fact p50, first after a write to own org (ms)",
            lat(s, "get_fact_first_after_own_org_write"),
            (None, None),
            False,
        ),
        (
            "recall p50, first after a write to own org (ms)",
            lat(s, "recall_first_after_own_org_write"),
            (None, None),
            False,
        ),
        *(
            (f"{label}, the write's rows taken in by the read: catch_up=read (ms)", lat(s, key), (None, None), False)
            for label, key in (
                ("get_fact p50, first after a write to own org", "get_fact_first_after_own_org_write_catch_up_on_read"),
                ("recall p50, first after a write to own org", "recall_first_after_own_org_write_catch_up_on_read"),
                ("single write p50 on the built store", "single_write_on_built_store_catch_up_on_read"),
            )
            if key in s
        ),
        *(
            (f"{label} (ms)", lat(s, key), (None, None), False)
            for label, key in (
                (
                    "get_fact p50, first after a write to own org, with a forget in the ledger",
                    "get_fact_first_after_own_org_write_with_a_forget_in_the_ledger",
                ),
                (
                    "recall p50, first after a write to own org, with a forget in the ledger",
                    "recall_first_after_own_org_write_with_a_forget_in_the_ledger",
                ),
                (
                    "single write p50 superseding a slot, with a forget in the ledger",
                    "single_write_superseding_with_a_forget_in_the_ledger",
                ),
                ("get_fact p50, an org's first read after a forget", "get_fact_first_of_an_org_after_a_forget"),
                ("recall p50, an org's first read after a forget", "recall_first_of_an_org_after_a_forget"),
            )
            if key in s
        ),
        *(
            (f"{label} (ms)", lat(s, key), (None, None), False)
            for label, key in (
                ("propose p50, by an agent", "propose_by_an_agent"),
                ("approve p50, by a lead", "approve_by_a_lead"),
                ("get_fact p50, a new actor's first after an approval", "get_fact_first_after_an_approval"),
                ("retract p50, by a lead", "retract_by_a_lead"),
                ("get_fact p50, a new actor's first after a retraction", "get_fact_first_after_a_retraction"),
                ("capture p50, four turns and what the rule extractor takes", "capture_of_four_turns"),
            )
            if key in s
        ),
        *(
            (f"{label} (ms)", lat(s, key), (None, None), False)
            for label, key in (
                ("write_many p50, a fact and a preference in one commit", "write_many_fact_and_preference"),
                (
                    "recall p50, first after a fact + preference commit, another org",
                    "recall_first_after_mixed_kind_write_other_org",
                ),
                (
                    "recall p50, first after a fact + preference commit, own org",
                    "recall_first_after_mixed_kind_write_own_org",
                ),
            )
            if key in s
        ),
        ("single write p50, fresh store (ms)", lat(s, "single_write_fresh_store"), (None, None), False),
        ("single write p50 on the built store (ms)", lat(s, "single_write_on_built_store"), (None, None), False),
        (
            "single write p50 on the built store, appends through delta-rs (ms)",
            lat(s, "single_write_on_built_store_through_delta_rs"),
            (None, None),
            False,
        ),
        *(
            (
                f"single write {q} on the built store, checkpoint every tenth version {where} (ms)",
                lat(s, key, q),
                (None, None),
                False,
            )
            for q in ("mean", "p99")
            for where, key in (
                ("in the background", "single_write_on_built_store_checkpoint_in_background"),
                ("in the append", "single_write_on_built_store_checkpoint_in_the_append"),
            )
        ),
        *(
            (
                f"{s[key]['threads']} threads writing one record at a time, group commit {tag}: {label}",
                (s[key][field], None),
                (None, None),
                False,
            )
            for tag in ("on", "off")
            for key in [f"concurrent_writes_group_commit_{tag}"]
            if key in s
            for label, field in (("writes/s", "writes_per_s"), ("write p50 (ms)", "p50_ms"))
        ),
        ("replay, ms per decision (200 at once)", (s["replay"]["ms_per_decision"], None), (None, None), False),
        (
            "Δ peak RSS (MB; the floor's in a process of its own)",
            (s["delta_rss_peak_mb"], None),
            (f.get("delta_rss_peak_mb"), None),
            False,
        ),
        (
            "Δ peak RSS through the store's close (MB)",
            (s.get("delta_rss_peak_through_close_mb"), None),
            (None, None),
            False,
        ),
    ]
    if "read_cache" in s:
        cache = s["read_cache"]
        rows.append(
            (
                f"reads that needed an org's history: queried it (picked it from the {cache['bound_mb']:,} MB read cache)",
                (cache["history_queries"], cache["history_picks"]),
                (None, None),
                False,
            )
        )

    for key, how in (("reopen", "as the run left it"), ("reopen_compacted", "compacted")):
        if key in s:
            again = s[key]
            rows += [
                (
                    f"reopened in a process of its own, {how} ({again['fact_files']:,} fact files): {label}",
                    (again[field], None),
                    (None, None),
                    False,
                )
                for label, field in (
                    ("open (s)", "open_s"),
                    ("first get_fact (ms)", "first_get_fact_ms"),
                    ("first recall (ms)", "first_recall_ms"),
                    ("Δ peak RSS (MB)", "delta_rss_peak_mb"),
                )
            ]

    def cell(v: tuple[float | None, float | None]) -> str:
        if v[0] is None:
            return ""
        return f"{v[0]:,}" + (f" ({v[1]:,})" if v[1] is not None else "")

    lines = [
        f"records: {result['records']:,}, workload: tenants (20 orgs x 5 teams x 10 actors), embedder: hashing; "
        f"Arrow pool: {result.get('arrow_pool')}; load {result.get('loadavg_before')} -> {result.get('loadavg_after')}",
        _environment_line(result.get("environment")),
        "",
        "| figure | memory_lakehouse (CPU) | floor: SQLite + numpy (CPU) | store / floor |",
        "|---|---|---|---|",
    ]
    for name, mine, theirs, higher_is_better in rows:
        ratio = (_ratio(theirs[0], mine[0]) if higher_is_better else _ratio(mine[0], theirs[0])) if theirs[0] else ""
        lines.append(f"| {name} | {cell(mine)} | {cell(theirs)} | {ratio} |")
    lines.append(
        f"\ntop-k starved: {s['top_k_starved']}, as-of leaks: {s['as_of_leaks']}, "
        f"replay leaks: {s['replay']['leaked_decisions']}; get_fact hit rate {s['get_fact_hit_rate']}; "
        f"approvals not served: {s.get('approved_not_served')}, retractions served: {s.get('retracted_served')}"
    )
    return "\n".join(lines)


def _environment_line(env: dict[str, Any] | None) -> str:
    """The run's Python, package versions and CPU, on one line under the table's header."""
    if not env:
        return "environment: not recorded"
    packages = ", ".join(f"{name} {version}" for name, version in env["packages"].items())
    return f"Python {env['python']}; {packages}; {env['cpu']}, {env['cores']} cores"


def run(
    records: int = 100_000,
    *,
    root: str | None = None,
    rounds: int = 200,
    floor: bool = True,
    floor_path: str | None = None,
    read_cache_bytes: int | None = None,
) -> dict[str, Any]:
    """The tenants figures for the store and (with *floor*) the floor beside it, on a store
    built at *root* (kept), or in a temp dir removed after the run; *read_cache_bytes* is the
    store's (`ml.open`), the default when None."""
    from .bench import bench_root

    with bench_root(root, "memlake-tenants-") as where:
        return _run(
            records, root=where, rounds=rounds, floor=floor, floor_path=floor_path, read_cache_bytes=read_cache_bytes
        )


def _run(
    records: int, *, root: str, rounds: int, floor: bool, floor_path: str | None, read_cache_bytes: int | None
) -> dict[str, Any]:
    from .bench import environment, in_fresh_process

    out: dict[str, Any] = {
        "records": records,
        "workload": "tenants",
        "rounds": rounds,
        "arrow_pool": pool_in_use(),
        "environment": environment(),
    }
    with open("/proc/loadavg", encoding="ascii") as fh:
        out["loadavg_before"] = fh.read().split()[:3]
    module = load_floor(floor_path) if floor else None
    with Progress("bench tenants", total=1 + (module is not None), unit="steps", enabled=True) as bar:
        bar.phase(f"the store at {records} records")
        out["store"] = run_store(records, root, rounds=rounds, read_cache_bytes=read_cache_bytes)
        bar.phase("the store reopened in a process of its own, then compacted and reopened")

        at = out["store"]["clock_at_close"]
        out["store"]["reopen"] = in_fresh_process(reopen, root, at)
        removed = in_fresh_process(compact, root, at)  # a process of its own: its heap is not reopen's
        out["store"]["reopen_compacted"] = {"compacted_files_removed": removed, **in_fresh_process(reopen, root, at)}
        bar.advance()
        if module is not None:
            bar.phase("the SQLite + numpy floor")
        out["floor"] = run_floor(module, records, rounds=rounds) if module is not None else None
        if module is not None:
            bar.phase("the floor's memory, in a process of its own")
            out["floor"]["delta_rss_peak_in_the_stores_process_mb"] = out["floor"]["delta_rss_peak_mb"]
            out["floor"]["delta_rss_peak_mb"] = _floor_memory_in_a_fresh_process(str(module.__file__), records, rounds)
        bar.advance(module is not None)
    with open("/proc/loadavg", encoding="ascii") as fh:
        out["loadavg_after"] = fh.read().split()[:3]
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # the whole run
    return out


def main(records: int, *, root: str | None, quick: bool, read_cache_bytes: int | None = None) -> None:
    result = run(records, root=root, rounds=50 if quick else 200, read_cache_bytes=read_cache_bytes)
    json.dump(result, sys.stdout, indent=2, default=str)
    print()
    print(markdown(result))
