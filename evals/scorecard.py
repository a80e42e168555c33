"""The scorecard: one JSON file, one markdown table and one PNG plot (ours vs naive per property).

Every row names the data it was measured on and the commit of the code that measured
it. The plot needs matplotlib (the ``eval`` extra); without it the JSON and the table
are still written and the scorecard says the plot was skipped.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from .core import UTC, EvalResult, fmt

JSON_NAME, MD_NAME, PNG_NAME = "scorecard.json", "scorecard.md", "scorecard.png"


def card(results: Sequence[EvalResult], *, commit: str, mode: str, data: str | None, embedder: str) -> dict[str, Any]:
    return {
        "commit": commit,
        "made_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": mode,
        "data_path": data,
        "embedder": embedder,
        "passed": all(r.passed for r in results),
        "evals": [r.to_dict() for r in results],
    }


def markdown(scorecard: dict[str, Any]) -> str:
    lines = [
        f"Scorecard — commit `{scorecard['commit']}`, {scorecard['mode']} mode, embedder "
        f"{scorecard['embedder']}, made {scorecard['made_at']}: "
        + ("**every gate passed**" if scorecard["passed"] else "**a gate failed**"),
        "",
        "| eval | metric | ours | naive | gate | pass | data | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ev in scorecard["evals"]:
        for m in ev["metrics"]:
            mark = {True: "yes", False: "**NO**", None: ""}[m["passed"]]
            lines.append(
                f"| {ev['name']} | {m['name']} | {fmt(m['ours'], m['unit'])} | "
                f"{fmt(m['naive'], m['unit'])} | {', '.join(m['gates'])} | {mark} | {m['data']} | "
                f"{scorecard['commit']} |"
            )
    footnotes = [
        f"- {ev['name']}, {m['name']}: {m['note']}" for ev in scorecard["evals"] for m in ev["metrics"] if m.get("note")
    ]
    if footnotes:
        lines += ["", "Notes:", "", *footnotes]
    notes = [(ev["name"], ev["details"]["effect"]) for ev in scorecard["evals"] if "effect" in ev.get("details", {})]
    for name, effect in notes:
        lines += ["", f"{name}: {effect}."]
    return "\n".join(lines) + "\n"


def plot(scorecard: dict[str, Any], path: Path) -> bool:
    """Ours vs naive for every rate or score that both memories were measured on. False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [
        (ev["name"], m)
        for ev in scorecard["evals"]
        for m in ev["metrics"]
        if m["unit"] in ("rate", "score") and m["ours"] is not None and m["naive"] is not None
    ]
    if not rows:
        return False
    labels = [f"{name}: " + (m.get("short") or textwrap.shorten(m["name"], 40, placeholder="…")) for name, m in rows]
    height = 0.38
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 1.4))
    ys = list(range(len(rows)))
    ax.barh([y - height / 2 for y in ys], [m["ours"] for _, m in rows], height, label="this store", color="#2b6cb0")
    ax.barh(
        [y + height / 2 for y in ys],
        [m["naive"] for _, m in rows],
        height,
        label="naive vector memory",
        color="#c05621",
    )
    for y, (_, m) in zip(ys, rows, strict=True):
        ax.text(max(m["ours"], 0) + 0.01, y - height / 2, fmt(m["ours"], m["unit"]), va="center", fontsize=7)
        ax.text(max(m["naive"], 0) + 0.01, y + height / 2, fmt(m["naive"], m["unit"]), va="center", fontsize=7)
    ax.set_yticks(ys, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(min(0.0, *(min(m["ours"], m["naive"]) for _, m in rows)) - 0.02, 1.12)
    ax.set_xlabel("share (lower is better for leakage, stale, cross-scope, served-after-forget)")
    ax.set_title(f"memlake eval — ours vs naive (commit {scorecard['commit']}, {scorecard['mode']})", fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write(scorecard: dict[str, Any], out: Path) -> list[Path]:
    """Write the three files into *out* (created); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / JSON_NAME, out / MD_NAME]
    png = out / PNG_NAME
    scorecard["plot"] = (
        PNG_NAME
        if plot(scorecard, png)
        else "skipped: matplotlib is not installed (pip install 'memory-lakehouse[eval]')"
    )
    if scorecard["plot"] == PNG_NAME:
        written.append(png)
    (out / JSON_NAME).write_text(json.dumps(scorecard, indent=2, default=str) + "\n", encoding="utf-8")
    (out / MD_NAME).write_text(markdown(scorecard), encoding="utf-8")
    return written
