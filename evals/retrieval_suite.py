"""Retrieval in the suite: the labelled fixture of `evals.retrieval`, ours vs BM25 vs vectors vs naive.

This wraps `evals.retrieval` (its fixture, its store loading and its scoring) and adds
the naive memory on the same memories: cosine top-k inside the asker's tenant, no
supersession and no scope precedence. Gated here: no distractor (a superseded version,
or a memory outside the asker's scope) among the store's hits. The claim that the
hybrid beats both single signals is `memlake eval retrieval`'s own gate (issue 12); it is
reported here, not gated twice. A full run (not ``--quick``) also reports the LoCoMo dev
conversations (``--data``, else ``../shared/data/locomo-dev``; skipped when absent):
session Hit@1 and turn R@5 of the default ranking and of each signal alone, each
conversation held out in turn (`evals.locomo`), and the naive memory on the same turns;
and a generated LongMemEval-format sample (`evals.longmemeval`: each question's haystack
loaded by the store's own loader), turn R@5 and session recall_all@5 per question type
of the default, each signal alone and the naive memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import memory_lakehouse as ml

from . import retrieval
from .core import Context, EvalResult, Gate, Metric, naive_item

NAME = "retrieval"


def locomo_folder(ctx: Context) -> Path | None:
    """Where LoCoMo-format conversations are for a full run (``--data``, else the dev folder), if anywhere."""
    if ctx.quick:
        return None
    for folder in (ctx.data, retrieval.LOCOMO_DEV):
        if folder is not None and Path(folder).is_dir() and any(Path(folder).glob("*.json")):
            return Path(folder)
    return None


def naive_on_locomo(folder: Path, ctx: Context) -> dict[str, Any]:
    """The naive memory on the same LoCoMo turns (`locomo.turn_record`), each question its cosine
    top 50 inside the tenant; pooled over every conversation (nothing is tuned, nothing held out)."""
    from . import locomo

    outcomes = []
    for conv in locomo.read_dir(folder):
        naive = ctx.naive()
        scope = locomo.STEWARD.scope
        naive.add(
            [
                naive_item(locomo.turn_record(conv, t), t.dia_id, scope, conv.dates[t.session], t.dia_id)
                for t in conv.turns
            ]
        )
        for q in conv.questions:
            ranked = [h.item.label for h in naive.search(q.text, org=scope.org, k=50)]
            outcomes.append(locomo.score_question(q, ranked))
    return locomo.summarise(outcomes)


def longmemeval_format(ctx: Context, questions: int, metrics: list[Metric]) -> dict[str, Any]:
    """The generated LongMemEval-format sample through the store's loader and the naive memory;
    appends its metrics, returns its report."""
    from . import longmemeval

    seed = ctx.seed("retrieval_lme")
    report = longmemeval.evaluate(
        longmemeval.generate(seed, questions),
        open_store=lambda root, clock: ctx.wrap(ml.open(str(root), clock=clock, embedder=ctx.embedder)),
        naive=ctx.naive,
        tick=lambda done, total: ctx.tick(f"{NAME} (LongMemEval format)", done, total),
    )
    data = f"generated LongMemEval-format sample (seed {seed}, {report['questions']} questions)"
    naive = report["results"]["naive"]
    for setting in longmemeval.SETTINGS:
        res = report["results"][setting]
        for measure, label in (("session_recall_all@5", "session recall_all@5"), ("turn_r@5", "turn R@5")):
            metrics.append(
                Metric(
                    f"LongMemEval-format {label} — {setting}",
                    res[measure],
                    naive[measure] if setting == "default" else None,
                    unit="score",
                    data=data,
                    short=f"lme {'turn R@5' if measure == 'turn_r@5' else 'all@5'} {setting}",
                )
            )
    return {"data": data, **report}


def run(ctx: Context) -> EvalResult:
    fixture = retrieval.Fixture.load(retrieval.FIXTURE)
    store = ctx.open_store(NAME, lambda: fixture.now)
    ids = retrieval.load_store(store, fixture)
    k = 10
    # quick: the hybrid only (the default recall); the full run also ranks by each signal alone
    modes = retrieval.evaluate(store, fixture, ids, k=k, modes={"hybrid": None} if ctx.quick else None)
    naive = ctx.naive()
    naive.add(
        [
            naive_item(retrieval.record(m), ids[m["label"]], ml.Scope.parse(m["scope"]), fixture.now, m["label"])
            for m in fixture.memories
        ]
    )
    memory = {m["label"]: m for m in fixture.memories}
    ranks: list[int | None] = []
    distractors = 0
    for n, q in enumerate(fixture.queries):
        who = fixture.principals[q["principal"]]
        labels = [h.item.label for h in naive.search(q["text"], org=who.scope.org, k=k)]
        distractors += sum(
            1 for x in labels if memory[x]["role"] == "superseded" or not retrieval.readable(who, memory[x]["scope"])
        )
        ranks.append(labels.index(q["answer"]) + 1 if q["answer"] in labels else None)
        ctx.tick(NAME, n + 1, len(fixture.queries))
    naive_scores = retrieval.scores(ranks, k)
    key = f"mrr@{k}"
    ours_distractors = sum(
        sum(row["distractor_hits"].values()) for name, row in modes.items() if name != "oracle_switch"
    )
    single = [m for m in ("lexical", "vector") if m in modes]
    metrics = [
        Metric(
            f"{measure} — hybrid (ours) vs naive",
            modes["hybrid"][measure],
            naive_scores[measure],
            unit="score",
            short=f"{measure} hybrid",
        )
        for measure in ("hit@1", "hit@5", key)
    ]
    metrics += [
        Metric(f"{measure} — {mode} alone", modes[mode][measure], unit="score")
        for mode in single
        for measure in ("hit@1", key)
    ]
    metrics += [
        Metric(
            "distractor hits (superseded or out of scope) in the top k",
            float(ours_distractors),
            float(distractors),
            (Gate("ours", "==", 0),),
            unit="count",
        ),
    ]
    if single:
        claim = not [p for p in retrieval.verdict({"modes": modes, "k": k}) if "does not beat" in p]
        metrics.append(
            Metric(
                "hybrid beats both single signals on hit@1, hit@5 and MRR (issue 12's gate)",
                1.0 if claim else 0.0,
                unit="score",
                note="gated by `memlake eval retrieval`, not here",
            )
        )
    details: dict[str, Any] = {
        "memories": len(fixture.memories),
        "queries": len(fixture.queries),
        "k": k,
        "naive": naive_scores,
        "embedder": ctx.embedder.name,
    }
    folder = locomo_folder(ctx)
    if folder is not None:  # the full run: LoCoMo dev conversations, each held out in turn
        from . import locomo

        report = locomo.evaluate(folder, embedder=ctx.embedder)
        report.pop("per_conv")
        naive_locomo = naive_on_locomo(folder, ctx)
        details["locomo"] = {"path": str(folder), **report, "naive": naive_locomo}
        for setting, res in report["results"].items():
            for measure in ("session_hit@1", "turn_r@5"):
                metrics.append(
                    Metric(
                        f"LoCoMo {measure.replace('_', ' ')} — {setting} (each conversation held out)",
                        res["pooled"][measure],
                        naive_locomo[measure] if setting == "default" else None,
                        unit="score",
                        data=str(folder),
                        short=f"locomo {measure.split('_')[1]} {setting}",
                    )
                )
    lme_questions = ctx.size("retrieval.lme", 0, 60)
    if lme_questions:
        details["longmemeval_format"] = longmemeval_format(ctx, lme_questions, metrics)
    return EvalResult(
        NAME, f"retrieval fixture ({len(fixture.memories)} memories, {len(fixture.queries)} queries)", metrics, details
    )
