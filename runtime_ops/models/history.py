"""Evaluation history: the metrics of every evaluated model version, as a markdown table with bar plots.

Pure (no Dagster, no I/O): the evaluation_report asset renders it into its metadata, so the Dagster UI shows
how retrieval quality moved across versions next to each report. Markdown instead of an image because the UI
renders it everywhere (asset page, run logs) and it stays readable in a terminal and in `git diff`.

Numbers scored on different question sets do not compare: each row names its set and question count, and a
change against the previous row is shown only when both rows were scored on the same set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtime_ops.markdown import table_cell

DEFAULT_METRICS = ("recall@5", "ndcg@10", "mrr")
BAR_WIDTH = 20
_EIGHTHS = " ▏▎▍▌▋▊▉"


@dataclass(frozen=True)
class EvaluatedVersion:
    version: int
    metrics: Mapping[str, float]
    verdict: str = ""  # e.g. "auto-approve", "needs approval", "reject"
    production: bool = False  # the production model when this history was drawn
    question_set: str = ""  # the evaluation set's version (digest) these metrics were scored on
    questions: int | None = None  # how many questions of that set were scored


def set_label(question_set: str, questions: int | None) -> str:
    """`abc123def456 (45 q)`: how every number of the gate names the set it was scored on."""
    label = question_set[:12] or "?"
    return f"{label} ({questions} q)" if questions is not None else label


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
    """One row per version (oldest first): the set it was scored on, each metric's value and bar, and the change
    against the previous row when that row was scored on the same set."""
    if not versions:
        return "_No evaluated model versions yet._"
    rows = sorted(versions, key=lambda v: v.version)
    head = ["version", "set", *[f"{m}" for m in metrics], "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    previous: EvaluatedVersion | None = None
    for row in rows:
        name = f"v{row.version}"
        if row.production:
            name += " (production)"
        if highlight == row.version:
            name = f"**{name}**"
        cells = [name, f"`{set_label(row.question_set, row.questions)}`" if row.question_set else "n/a"]
        comparable = previous is not None and previous.question_set == row.question_set
        for metric in metrics:
            value = row.metrics.get(metric)
            if value is None:
                cells.append("n/a")
                continue
            cell = f"`{bar(value)}` {value:.3f}"
            before = previous.metrics.get(metric) if previous is not None and comparable else None
            if before is not None:
                cell += f" ({value - before:+.3f})"
            cells.append(cell)
        cells.append(table_cell(row.verdict) or "n/a")
        lines.append("| " + " | ".join(cells) + " |")
        previous = row
    # "Best" only among rows scored on the newest row's set: a higher number on another set says nothing.
    anchor = next((r for r in rows if r.version == highlight), rows[-1])
    same_set = [r for r in rows if r.question_set == anchor.question_set]
    best = {m: max(same_set, key=lambda r: r.metrics.get(m, float("-inf"))) for m in metrics}
    lines.append("")
    tops = (f"{m} v{best[m].version} ({best[m].metrics.get(m, float('nan')):.3f})" for m in metrics)
    on = f" on set `{set_label(anchor.question_set, anchor.questions)}`" if anchor.question_set else ""
    lines.append(f"Best{on}: " + ", ".join(tops))
    return "\n".join(lines)
