"""Retrieval quality: lexical-only vs vector-only vs hybrid recall on a labelled fixture.

``python -m evals.retrieval`` loads ``data/retrieval/fixture.jsonl`` (see
``data/retrieval/make_fixture.py``) into a fresh store through the public API, asks
every query as its principal three ways — BM25 alone, vectors alone, both fused (the
default recall) — and reports hit@1, hit@5 and MRR@k per mode, plus *distractor hits*:
superseded versions or memories outside the asker's scope that came back in the top
k. Visibility is applied before ranking, so that count must be 0 for every mode. A
reference row, the better of the lexical and vector ranks per query, shows how much
the two signals have to offer each other on the fixture.

Queries are split in two halves by a hash of their id (`split_of`), fixed before any
ranking constant was chosen: the hybrid's one tuned constant, the weight of lexical
coverage in fusion (`memory_lakehouse.ranking.LEXICAL_WEIGHT`), is chosen on *dev* only
and *test* is held out; every mode is reported on the whole fixture and on each half.
Queries also carry the *batch* they were written in: batch 2 was written after the
constant had been chosen on batch 1's dev half and before anything was ranked on it,
so all of batch 2 is held out; it is reported apart, and ``--tune`` (which sweeps
`ALPHAS`) still picks on batch 1's dev half (`TUNING_SET`: best MRR, the smallest
weight on a tie).

Exit status 1 when hybrid does not beat both single signals on every reported measure
(hit@1, hit@5 and MRR@k over the whole fixture), when its hit@5 drops below
`HIT5_FLOOR` (what it was before the ranking learnt conversations), or any distractor
appears. When ``../shared/data/locomo-dev`` (``--locomo PATH``) holds LoCoMo-format
conversations, their figures (`evals.locomo`, each conversation held out in turn) are
reported beside the fixture's; they do not gate the exit status. The
embedder is the store's default (MiniLM); ``--embedder hashing`` runs without the
model (its "vector" signal then only matches shared words).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import memory_lakehouse as ml

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "retrieval" / "fixture.jsonl"
#: Ranker name -> the recall signals it fuses (None: the default, every signal).
MODES: dict[str, tuple[str, ...] | None] = {"lexical": ("bm25",), "vector": ("vector",), "hybrid": None}
KINDS = {"fact": ml.Fact, "preference": ml.Preference, "episode": ml.Episode, "reference": ml.Reference}
TIMES = ("valid_from", "observed_at", "published_at")
#: LoCoMo-format dev conversations, reported beside the fixture when present (never copied here).
LOCOMO_DEV = Path("../shared/data/locomo-dev")
#: Queries are split once, by a hash of their id, before any ranking constant is chosen:
#: constants of the ranker may be chosen on "dev" only; "test" is reported as held out.
SPLITS = ("dev", "test")
#: Where ranking constants are chosen: the dev half of batch 1 (batch 2 was written later, to be held out).
TUNING_SET = ("dev", 1)
#: The fusion weights ``--tune`` tries on the tuning set (declared before the sweep was run).
ALPHAS = (0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


def split_of(qid: str) -> str:
    """The query's split, "dev" or "test": the first byte of SHA-256 of its id, even or odd."""
    return SPLITS[hashlib.sha256(f"retrieval-split:{qid}".encode()).digest()[0] % 2]


@dataclass(frozen=True)
class Fixture:
    now: datetime
    principals: dict[str, ml.Principal]
    memories: list[dict]
    queries: list[dict]

    def batches(self) -> list[int]:
        """Each query's batch (1 when the fixture does not say)."""
        return [q.get("batch", 1) for q in self.queries]

    @classmethod
    def load(cls, path: Path = FIXTURE) -> Fixture:
        meta, memories, queries = None, [], []
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            if item["type"] == "meta":
                meta = item
            elif item["type"] == "memory":
                memories.append(item)
            elif item["type"] == "query":
                queries.append(item)
        if meta is None:
            raise ValueError(f"{path}: no meta line")
        principals = {
            name: ml.Principal(name, ml.Scope.parse(scope), role="member") for name, scope in meta["principals"].items()
        }
        return cls(datetime.fromisoformat(meta["now"]), principals, memories, queries)


def record(memory: dict) -> ml.Envelope:
    fields = dict(memory["fields"])
    for name in TIMES:
        if name in fields:
            fields[name] = datetime.fromisoformat(fields[name])
    return KINDS[memory["kind"]](**fields, scope=ml.Scope.parse(memory["scope"]))


def load_store(store: ml.MemoryStore, fixture: Fixture) -> dict[str, str]:
    """Write every memory through `write_many` (one batch per org, by its steward); label -> record_id."""
    by_org: dict[str, list[dict]] = {}
    for m in fixture.memories:
        by_org.setdefault(m["scope"].split("/")[0], []).append(m)
    ids: dict[str, str] = {}
    for org, memories in by_org.items():
        steward = ml.Principal(f"fixture-steward-{org}", ml.Scope(org), role="steward")
        result = store.write_many([record(m) for m in memories], by=steward, reason="retrieval fixture")
        for m, res in zip(memories, result, strict=True):
            if res.action == "duplicate":
                raise ValueError(f"fixture memory {m['label']} duplicates {res.record_id}")
            ids[m["label"]] = res.record_id
    return ids


def readable(principal: ml.Principal, scope: str) -> bool:
    return principal.can_read(ml.Scope.parse(scope))


def word_overlap(fixture: Fixture) -> dict[str, float]:
    """How many of a query's words (BM25's tokens, stopwords dropped) occur in its answer."""
    import bm25s

    by_label = {m["label"]: m for m in fixture.memories}

    def words(text: str) -> set[str]:
        return set(bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0])

    shares = []
    for q in fixture.queries:
        answer = " ".join(
            str(v) for k, v in by_label[q["answer"]]["fields"].items() if k not in TIMES + ("source", "evidence")
        )
        qw = words(q["text"])
        shares.append(len(qw & words(answer)) / max(1, len(qw)))
    return {
        "mean_share_of_query_words_in_answer": round(sum(shares) / len(shares), 3),
        "queries_sharing_no_word_with_answer": sum(1 for s in shares if s == 0),
    }


def evaluate(
    store: ml.MemoryStore,
    fixture: Fixture,
    ids: dict[str, str],
    *,
    k: int = 10,
    modes: dict[str, tuple[str, ...] | None] | None = None,
) -> dict[str, Any]:
    """Ask every query in every mode; score ranks (overall and per split) and count distractors returned."""
    label_of = {rid: label for label, rid in ids.items()}
    memory = {m["label"]: m for m in fixture.memories}
    qsplits = [split_of(q["qid"]) for q in fixture.queries]
    qbatches = fixture.batches()
    out: dict[str, Any] = {}
    for mode, signals in (MODES if modes is None else modes).items():
        ranks: list[int | None] = []
        distractors: Counter[str] = Counter()
        misses = []
        started = time.perf_counter()
        for q in fixture.queries:
            who = fixture.principals[q["principal"]]
            hits = store.recall(q["text"], by=who, k=k, signals=signals)
            labels = [label_of[h.record_id] for h in hits]
            for label in labels:
                m = memory[label]
                if m["role"] == "superseded":
                    distractors["superseded"] += 1
                if not readable(who, m["scope"]):
                    distractors["out_of_scope"] += 1
            # hits no ranker scored only fill up to k (in record-id order): they do not count as found
            ranked = [
                label
                for label, h in zip(labels, hits, strict=True)
                if not any(w.startswith("no signal") for w in h.why)
            ]
            rank = ranked.index(q["answer"]) + 1 if q["answer"] in ranked else None
            ranks.append(rank)
            if rank != 1:
                misses.append({"qid": q["qid"], "rank": rank, "top": ranked[:3]})
        out[mode] = {
            **scores(ranks, k),
            "splits": split_scores(ranks, qsplits, k),
            "tuning_set": scores(
                [r for r, s, b in zip(ranks, qsplits, qbatches, strict=True) if (s, b) == TUNING_SET], k
            ),
            "batches": batch_scores(ranks, qbatches, k),
            "distractor_hits": {"superseded": distractors["superseded"], "out_of_scope": distractors["out_of_scope"]},
            "ms_per_query": round((time.perf_counter() - started) * 1000 / len(ranks), 2),
            "misses": misses,
            "ranks": ranks,
        }
    if "lexical" in out and "vector" in out:
        # how complementary the two signals are: per query, the better of the two single-signal ranks
        best = [
            min((r for r in pair if r is not None), default=None)
            for pair in zip(out["lexical"]["ranks"], out["vector"]["ranks"], strict=True)
        ]
        out["oracle_switch"] = {
            **scores(best, k),
            "splits": split_scores(best, qsplits, k),
            "batches": batch_scores(best, qbatches, k),
        }
    for row in out.values():
        row.pop("ranks", None)
    return out


def tune(
    store: ml.MemoryStore, fixture: Fixture, ids: dict[str, str], *, k: int = 10, alphas: Sequence[float] = ALPHAS
) -> dict[str, Any]:
    """Sweep the fusion weight: hybrid scores per alpha; the pick is the best MRR on `TUNING_SET`
    (batch 1's dev half; smallest alpha on a tie).

    The test half and batch 2 only report what the pick does on queries it was not chosen on.
    """
    key = f"mrr@{k}"
    retriever = store.retriever
    default = retriever.ranking
    rows = []
    try:
        for alpha in alphas:
            retriever.ranking = default.replace(lexical_weight=alpha)
            row = evaluate(store, fixture, ids, k=k, modes={"hybrid": None})["hybrid"]
            rows.append(
                {
                    "alpha": alpha,
                    "all": {m: row[m] for m in ("hit@1", "hit@5", key)},
                    "tuning_set": row["tuning_set"],
                    **row["splits"],
                }
            )
    finally:
        retriever.ranking = default
    pick = max(rows, key=lambda r: (r["tuning_set"][key], -r["alpha"]))
    return {
        "rule": "best MRR on batch 1's dev half, smallest alpha on a tie",
        "picked": pick["alpha"],
        "default": default.lexical_weight,
        "sweep": rows,
    }


def split_scores(ranks: Sequence[int | None], splits: Sequence[str], k: int) -> dict[str, dict[str, float]]:
    return {name: scores([r for r, s in zip(ranks, splits, strict=True) if s == name], k) for name in SPLITS}


def batch_scores(ranks: Sequence[int | None], batches: Sequence[int], k: int) -> dict[str, dict[str, float]]:
    return {
        f"batch{b}": scores([r for r, x in zip(ranks, batches, strict=True) if x == b], k) for b in sorted(set(batches))
    }


def scores(ranks: Sequence[int | None], k: int) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit@1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "hit@5": round(sum(1 for r in ranks if r is not None and r <= 5) / n, 3),
        f"mrr@{k}": round(sum(1 / r for r in ranks if r is not None) / n, 3),
    }


def run(
    fixture_path: Path = FIXTURE,
    *,
    embedder: Any = None,
    k: int = 10,
    sweep: bool = False,
    ranking: ml.Ranking | None = None,
) -> dict[str, Any]:
    """The fixture's figures for each mode; *ranking* is the store's (the default's when None)."""
    fixture = Fixture.load(fixture_path)
    with tempfile.TemporaryDirectory(prefix="memlake-eval-retrieval-") as root:
        store = ml.open(root, clock=lambda: fixture.now, embedder=embedder, ranking=ranking)
        ids = load_store(store, fixture)
        modes = evaluate(store, fixture, ids, k=k)
        tuning = tune(store, fixture, ids, k=k) if sweep else None
    model = (embedder or ml.MiniLMEmbedder).name
    roles = Counter(m["role"] for m in fixture.memories)
    return {
        "fixture": {
            "path": str(fixture_path),
            "memories": len(fixture.memories),
            "queries": len(fixture.queries),
            "roles": dict(sorted(roles.items())),
            **word_overlap(fixture),
        },
        "embedder": model,
        "k": k,
        "splits": dict(Counter(split_of(q["qid"]) for q in fixture.queries)),
        "batches": {f"batch{b}": n for b, n in sorted(Counter(fixture.batches()).items())},
        "modes": modes,
        **({"tuning": tuning} if tuning else {}),
    }


#: The default ranking's hit@5 on the fixture before the LoCoMo work (issue 12: it must not drop).
HIT5_FLOOR = 0.862


def verdict(report: dict[str, Any]) -> list[str]:
    """What fails the eval: hybrid not beating both single signals on each measure, its hit@5
    below `HIT5_FLOOR` (with the default embedder), or any distractor."""
    modes = report["modes"]
    problems = [
        f"hybrid {measure} {modes['hybrid'][measure]} does not beat {mode} ({modes[mode][measure]})"
        for measure in ("hit@1", "hit@5", f"mrr@{report['k']}")
        for mode in ("lexical", "vector")
        if modes["hybrid"][measure] <= modes[mode][measure]
    ]
    if report.get("embedder") == ml.MiniLMEmbedder.name and modes["hybrid"]["hit@5"] < HIT5_FLOOR:
        problems.append(f"hybrid hit@5 {modes['hybrid']['hit@5']} dropped below {HIT5_FLOOR}")
    for mode, row in modes.items():
        for what, count in row.get("distractor_hits", {}).items():
            if count:
                problems.append(f"{mode}: {count} {what} distractor hit(s)")
    return problems


def markdown(report: dict[str, Any]) -> str:
    key = f"mrr@{report['k']}"
    f = report["fixture"]
    lines = [
        f"Retrieval eval — {f['memories']} memories, {f['queries']} queries, embedder {report['embedder']}; "
        f"on average {f['mean_share_of_query_words_in_answer']:.0%} of a query's words occur in its answer "
        f"({f['queries_sharing_no_word_with_answer']} queries share none)",
        "",
        f"| mode | hit@1 | hit@5 | {key.upper()} | superseded hits | out-of-scope hits | ms/query |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, row in report["modes"].items():
        if mode == "oracle_switch":
            continue
        d = row["distractor_hits"]
        lines.append(
            f"| {mode} | {row['hit@1']:.3f} | {row['hit@5']:.3f} | {row[key]:.3f} | {d['superseded']} | "
            f"{d['out_of_scope']} | {row['ms_per_query']:.1f} |"
        )
    o = report["modes"]["oracle_switch"]
    lines.append(
        f"| *(reference: better of lexical/vector per query)* | {o['hit@1']:.3f} | {o['hit@5']:.3f} | "
        f"{o[key]:.3f} | | | |"
    )
    n = report["splits"]
    lines += [
        "",
        f"By split (dev: {n.get('dev', 0)} queries, constants chosen here; "
        f"test: {n.get('test', 0)} queries, held out):",
        "",
        f"| mode | dev hit@1 | dev {key.upper()} | test hit@1 | test hit@5 | test {key.upper()} |",
        "|---|---|---|---|---|---|",
    ]
    for mode, row in report["modes"].items():
        d, t = row["splits"]["dev"], row["splits"]["test"]
        lines.append(
            f"| {mode} | {d['hit@1']:.3f} | {d[key]:.3f} | {t['hit@1']:.3f} | {t['hit@5']:.3f} | {t[key]:.3f} |"
        )
    if len(report["batches"]) > 1:
        lines += [
            "",
            "By batch ("
            + ", ".join(f"{b}: {n} queries" for b, n in report["batches"].items())
            + "; batch 2 was written after the fusion weight was chosen, so all of it is held out):",
            "",
            "| mode | " + " | ".join(f"{b} hit@1 | {b} hit@5 | {b} {key.upper()}" for b in report["batches"]) + " |",
            "|---|" + "---|---|---|" * len(report["batches"]),
        ]
        for mode, row in report["modes"].items():
            lines.append(
                f"| {mode} | "
                + " | ".join(f"{s['hit@1']:.3f} | {s['hit@5']:.3f} | {s[key]:.3f}" for s in row["batches"].values())
                + " |"
            )
    if "tuning" in report:
        tuning = report["tuning"]
        lines += [
            "",
            f"Fusion weight sweep (hybrid; pick: {tuning['rule']} -> alpha {tuning['picked']}; "
            f"the store's default is {tuning['default']}):",
            "",
            f"| alpha | batch 1 dev {key.upper()} | dev {key.upper()} | test {key.upper()} | all {key.upper()} |",
            "|---|---|---|---|---|",
        ]
        for row in tuning["sweep"]:
            lines.append(
                f"| {row['alpha']} | {row['tuning_set'][key]:.3f} | {row['dev'][key]:.3f} | "
                f"{row['test'][key]:.3f} | {row['all'][key]:.3f} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument(
        "--embedder",
        choices=("default", "hashing"),
        default="default",
        help="default: the store's offline MiniLM model; hashing: no model (quick, lexical)",
    )
    parser.add_argument("-k", type=int, default=10, help="results per query (MRR is cut at k)")
    parser.add_argument("--misses", action="store_true", help="list each mode's queries not ranked first")
    parser.add_argument(
        "--tune",
        action="store_true",
        help="also sweep the hybrid's fusion weight; the pick is made on the dev split only",
    )
    parser.add_argument(
        "--locomo",
        type=Path,
        default=LOCOMO_DEV,
        help="a folder of LoCoMo-format conversations: their figures are reported beside the "
        f"fixture's, each conversation held out in turn (default {LOCOMO_DEV}; skipped "
        "when absent)",
    )
    parser.add_argument("--no-locomo", action="store_true", help="the fixture only")
    parser.add_argument(
        "--fusion",
        choices=ml.ranking.FUSIONS,
        help="the fixture's store ranks with ml.Ranking(fusion=...) (default: the default Ranking)",
    )
    parser.add_argument(
        "--learned",
        action="store_true",
        help='LoCoMo: also "learned" fusion, its weights fitted on the other conversations',
    )
    args = parser.parse_args(argv)
    embedder = ml.HashingEmbedder(dim=384) if args.embedder == "hashing" else None
    ranking = ml.Ranking(fusion=args.fusion) if args.fusion else None
    report = run(args.fixture, embedder=embedder, k=args.k, sweep=args.tune, ranking=ranking)
    problems = verdict(report)
    report["passed"] = not problems
    report["problems"] = problems
    print(markdown(report))
    print()
    if not args.no_locomo:
        if args.locomo.is_dir() and any(args.locomo.glob("*.json")):
            from . import locomo

            settings = {**locomo.SETTINGS, **(locomo.learned_settings(args.locomo, embedder) if args.learned else {})}
            conv = locomo.evaluate(
                args.locomo, settings, embedder=embedder, progress=lambda m: print(m, file=sys.stderr), pick=False
            )
            conv.pop("per_conv")
            report["locomo"] = {"path": str(args.locomo), **conv}
            print(locomo.markdown(conv))
            print()
        else:
            print(f"LoCoMo: skipped ({args.locomo} holds no LoCoMo-format conversations)")
            print()
    if not args.misses:
        for row in report["modes"].values():
            row.pop("misses", None)
    print(json.dumps(report, indent=2))
    for line in problems:
        print(f"FAIL: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
