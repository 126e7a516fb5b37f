"""Evaluation history: the metrics of every evaluated model version, as a markdown table with bar plots.

Pure (no Dagster, no I/O): the evaluation_report asset renders it into its metadata, so the Dagster UI shows
how retrieval quality moved across versions next to each report. Markdown instead of an image because the UI
renders it everywhere (asset page, run logs) and it stays readable in a terminal and in `git diff`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_METRICS = ("recall@5", "ndcg@10", "mrr")
BAR_WIDTH = 20
_EIGHTHS = " ▏▎▍▌▋▊▉"


@dataclass(frozen=True)
class EvaluatedVersion:
    version: int
    metrics: Mapping[str, float]
    verdict: str = ""  # e.g. "auto-approve", "needs approval", "reject"
    production: bool = False  # the production model when this history was drawn


def bar(value: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of `value` in [0, 1] at 1/8-character resolution (clamped; NaN draws nothing)."""
    if not isinstance(value, int | float) or math.isnan(value):
        return ""
    eighths = round(min(max(float(value), 0.0), 1.0) * width * 8)
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def history_markdown(
    versions: Sequence[EvaluatedVersion], metrics: Sequence[str] = DEFAULT_METRICS, *, highlight: int | None = None
) -> str:
    """One row per version (oldest first): each metric's value and bar, the change against the previous row."""
    if not versions:
        return "_No evaluated model versions yet._"
    rows = sorted(versions, key=lambda v: v.version)
    head = ["version", *[f"{m}" for m in metrics], "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    previous: EvaluatedVersion | None = None
    for row in rows:
        name = f"v{row.version}"
        if row.production:
            name += " (production)"
        if highlight == row.version:
            name = f"**{name}**"
        cells = [name]
        for metric in metrics:
            value = row.metrics.get(metric)
            if value is None:
                cells.append("n/a")
                continue
            cell = f"`{bar(value)}` {value:.3f}"
            before = previous.metrics.get(metric) if previous else None
            if before is not None:
                cell += f" ({value - before:+.3f})"
            cells.append(cell)
        cells.append(row.verdict.replace("|", "\\|") or "n/a")
        lines.append("| " + " | ".join(cells) + " |")
        previous = row
    best = {m: max(rows, key=lambda r: r.metrics.get(m, float("-inf"))) for m in metrics}
    lines.append("")
    tops = (f"{m} v{best[m].version} ({best[m].metrics.get(m, float('nan')):.3f})" for m in metrics)
    lines.append("Best: " + ", ".join(tops))
    return "\n".join(lines)
