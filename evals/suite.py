"""The suite runner: ``memlake eval [NAME…]`` and ``python -m evals``.

Runs the named evals (``all``: every one) and writes the scorecard (JSON, markdown,
PNG) into ``--out``. ``--quick`` runs small generated datasets (what ``make demo``
runs, well under a minute); the full run uses larger ones and ``--data`` points at a
dataset folder (the LoCoMo dev conversations) for the evals that read one. Exit status
1 when a gate fails, 2 on bad arguments.

``memlake eval retrieval`` followed by the retrieval eval's own options (``--tune``,
``--fixture``, ``--misses``, ``-k``) runs that eval's own report, as before.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import memory_lakehouse as ml

from . import scorecard
from .core import Context, EvalResult, commit_label

#: Eval name -> its module in this package (each has ``run(ctx) -> EvalResult``).
EVALS: dict[str, str] = {
    "temporal": "temporal",
    "knowledge_update": "knowledge_update",
    "provenance": "provenance",
    "forgetting": "forgetting",
    "scope": "scope_isolation",
    "abstention": "abstention",
    "contradiction": "contradiction",
    "skew": "skew",
    "policy": "policy_resolution",
    "retrieval": "retrieval_suite",
}


def available() -> list[str]:
    """The evals whose module exists in this checkout, in the suite's order."""
    out = []
    for name, module in EVALS.items():
        try:
            importlib.import_module(f"evals.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"evals.{module}":
                raise
            continue
        out.append(name)
    return out


def runner(name: str) -> Callable[[Context], EvalResult]:
    module = importlib.import_module(f"evals.{EVALS[name]}")
    fn: Callable[[Context], EvalResult] = module.run
    return fn


def run_suite(names: Sequence[str], ctx: Context, bar: ml.Progress | None = None) -> list[EvalResult]:
    """Run *names* in order; *bar* (`ml.Progress` over the evals) names each as it starts."""
    results = []
    try:
        for name in names:
            if bar is not None:
                bar.phase(name)
            started = time.perf_counter()
            result = runner(name)(ctx)
            result.seconds = time.perf_counter() - started
            results.append(result)
            if bar is not None:
                bar.advance()
    finally:
        ctx.close()
    return results


def _ticker(bar: ml.Progress) -> Callable[[str, int, int], None]:
    """An eval's per-case count (`Context.tick`) as the suite bar's label: ``eval: temporal 12/40``."""

    def tick(label: str, done: int, total: int) -> None:
        bar.phase(f"{label} {done}/{total}", logged=False)

    return tick


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlake eval", description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "names", nargs="*", default=["all"], metavar="NAME", help="evals to run (default: all): " + ", ".join(EVALS)
    )
    p.add_argument("--quick", action="store_true", help="small generated datasets (the demo's run)")
    p.add_argument("--data", type=Path, help="dataset folder, e.g. ../shared/data/locomo-dev (full run)")
    p.add_argument("--out", type=Path, help="folder for scorecard.json, scorecard.md and scorecard.png")
    p.add_argument(
        "--embedder",
        choices=("default", "hashing", "minilm"),
        default="default",
        help="default: hashing in --quick, the offline MiniLM model otherwise",
    )
    p.add_argument("--json", action="store_true", help="print the scorecard JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args, rest = parser().parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if rest:
        if args.names == ["retrieval"]:  # the retrieval eval's own options: its own report
            from . import retrieval

            return retrieval.main(rest)
        print(f"memlake eval: unknown option(s): {' '.join(rest)}", file=sys.stderr)
        return 2
    names = list(dict.fromkeys(n for name in args.names for n in (available() if name == "all" else [name])))
    unknown = [n for n in names if n not in EVALS]
    if unknown:
        print(
            f"memlake eval: no eval named {', '.join(unknown)} (have: all, {', '.join(available())})", file=sys.stderr
        )
        return 2
    if args.data is not None and not args.data.exists():
        print(f"memlake eval: --data {args.data}: no such folder", file=sys.stderr)
        return 2
    kind = "hashing" if args.embedder == "hashing" or (args.embedder == "default" and args.quick) else "minilm"
    embedder = ml.HashingEmbedder(dim=384) if kind == "hashing" else ml.MiniLMEmbedder()
    commit = commit_label()  # before the run: the code that measured, not what the tree holds at the end
    # the full run shows each eval and its cases (a bar on a terminal, log lines otherwise); --quick is silent
    with (
        ml.Progress.settings(bars=False if args.quiet else None),
        ml.Progress("eval", total=len(names), unit="evals", enabled=not args.quick) as bar,
    ):
        ctx = Context(quick=args.quick, data=args.data, embedder=embedder, progress=_ticker(bar))
        results = run_suite(names, ctx, bar)
    card = scorecard.card(
        results,
        commit=commit,
        mode="quick" if args.quick else "full",
        data=str(args.data) if args.data else None,
        embedder=embedder.name,
    )
    if args.out is not None:
        written = scorecard.write(card, args.out)
        print("scorecard: " + ", ".join(str(p) for p in written), file=sys.stderr)
    print(json.dumps(card, indent=2, default=str) if args.json else scorecard.markdown(card))
    failures = [line for r in results for line in r.failures()]
    for line in failures:
        print(f"FAIL: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
