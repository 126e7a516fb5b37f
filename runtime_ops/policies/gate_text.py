"""How the gate's interval and the most-changed questions read in Slack, on the approval page and in the UI (pure).

Both come from the verdict stored with an evaluation report: `interval` = {metric, mean_delta, low, high,
confidence, n}, `changed_questions` = [{id, question, candidate_top, production_top}].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def interval_text(interval: Mapping[str, Any] | None) -> str:
    """e.g. "ndcg@5 +0.031 (95% CI +0.012 to +0.049, 120 questions)"; "" without an interval."""
    if not interval:
        return ""
    confidence = float(interval.get("confidence", 0.95))
    return (
        f"{interval.get('metric', 'delta')} {float(interval['mean_delta']):+.3f} "
        f"({confidence:.0%} CI {float(interval['low']):+.3f} to {float(interval['high']):+.3f}, "
        f"{int(interval.get('n', 0))} questions)"
    )


def changed_lines(changed: Sequence[Mapping[str, Any]] | None, limit: int = 5) -> list[str]:
    """One line per question whose top results changed most: the question, then production's and the
    candidate's first documents."""
    lines = []
    for item in list(changed or [])[:limit]:
        prod = ", ".join(item.get("production_top") or []) or "nothing"
        cand = ", ".join(item.get("candidate_top") or []) or "nothing"
        lines.append(f"“{item.get('question', item.get('id', '?'))}”: production {prod} → candidate {cand}")
    return lines
