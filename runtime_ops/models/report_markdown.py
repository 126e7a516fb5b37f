"""The evaluation report's comparison table: candidate vs production metrics with signed deltas, as markdown (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from runtime_ops.markdown import table_cell

__all__ = ["comparison_markdown"]

# Metrics that are counts rather than scores, rendered as integers in reports.
_COUNT_METRICS = frozenset({"questions"})


def comparison_markdown(
    candidate: Mapping[str, float],
    production: Mapping[str, float] | None,
    *,
    candidate_label: str,
    production_label: str,
) -> str:
    """A markdown table of candidate vs production metrics with signed deltas ("—" where absent)."""
    names = list(candidate) + [m for m in (production or {}) if m not in candidate]
    prod_column = f"production ({_cell(production_label)})" if production is not None else "production"
    lines = [
        f"| metric | candidate ({_cell(candidate_label)}) | {prod_column} | delta |",
        "|---|---:|---:|---:|",
    ]
    for name in names:
        cand = candidate.get(name)
        prod = production.get(name) if production is not None else None
        delta = _format_delta(name, cand - prod) if cand is not None and prod is not None else "—"
        cells = (_cell(name), _format_value(name, cand), _format_value(name, prod), delta)
        lines.append("| " + " | ".join(cells) + " |")
    if production is None:
        lines.append("")
        lines.append("_No production model yet: nothing to compare against._")
    return "\n".join(lines) + "\n"


def _format_value(name: str, value: Any) -> str:
    if value is None:
        return "—"
    if name in _COUNT_METRICS and float(value).is_integer():
        return str(int(value))
    return f"{float(value):.4f}"


def _format_delta(name: str, delta: float) -> str:
    if math.isnan(delta):
        return "—"
    if name in _COUNT_METRICS and float(delta).is_integer():
        return f"{int(delta):+d}"
    # Round before choosing the sign so float noise never prints as "-0.0000".
    rounded = round(delta, 4) + 0.0
    return f"{rounded:+.4f}"


def _cell(text: str) -> str:
    return table_cell(str(text))
