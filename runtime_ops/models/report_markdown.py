"""The evaluation report's comparison table: candidate vs production metrics with signed deltas, as markdown (pure).

The gating set's metrics come first; a set reported beside it (the production queries) has its own rows, each
metric prefixed with the set's name, so no number of one set is read as the other's."""

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
    beside: Mapping[str, tuple[Mapping[str, float], Mapping[str, float] | None]] | None = None,
) -> str:
    """A markdown table of candidate vs production metrics with signed deltas ("—" where absent); `beside` maps the
    name of each other set to its (candidate, production) metrics, rendered as rows `<set>: <metric>`."""
    prod_column = f"production ({_cell(production_label)})" if production is not None else "production"
    lines = [
        f"| metric | candidate ({_cell(candidate_label)}) | {prod_column} | delta |",
        "|---|---:|---:|---:|",
    ]
    lines.extend(_rows("", candidate, production))
    for set_name, (cand_metrics, prod_metrics) in (beside or {}).items():
        lines.extend(_rows(f"{set_name}: ", cand_metrics, prod_metrics if production is not None else None))
    if production is None:
        lines.append("")
        lines.append("_No production model yet: nothing to compare against._")
    return "\n".join(lines) + "\n"


def _rows(prefix: str, candidate: Mapping[str, float], production: Mapping[str, float] | None) -> list[str]:
    names = list(candidate) + [m for m in (production or {}) if m not in candidate]
    lines = []
    for name in names:
        cand = candidate.get(name)
        prod = production.get(name) if production is not None else None
        delta = _format_delta(name, cand - prod) if cand is not None and prod is not None else "—"
        cells = (_cell(prefix + name), _format_value(name, cand), _format_value(name, prod), delta)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


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
