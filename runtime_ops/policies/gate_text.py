"""How the gate's verdict, its interval and the most-changed questions read in Slack, on the approval page, in the
evaluation report, the Dagster checks and the CLI (pure): the one home of these human words.

The verdict's reason (`policies/gate_rule.py`) starts with `outcome_words`; the interval and the changed questions
come from the verdict stored with an evaluation report: `interval` = {metric, mean_delta, low, high, confidence, n},
`changed_questions` = [{id, question, direction, delta, change, depth, relevant: [{document, production,
candidate}]}] (`policies/changed_questions.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

__all__ = ["Outcome", "changed_lines", "changed_parts", "interval_text", "outcome_words", "verdict_parts"]


class Outcome(StrEnum):
    """Where the interval of candidate - production lies against 0 and the policy's two limits (stored as is)."""

    CLEARS_MARGIN = "better_clears_margin"  # lower bound >= the auto-approve margin: auto-approved
    BETTER_BELOW_MARGIN = "better_below_margin"  # lower bound > 0 but below the margin: a person decides
    NO_DIFFERENCE = "no_difference"  # the interval covers 0: a person decides
    WORSE_WITHIN_LIMIT = "worse_within_limit"  # upper bound < 0, not below -max_regression: a person decides
    WORSE_BEYOND_LIMIT = "worse_beyond_limit"  # upper bound < -max_regression: fails the policy
    FIRST_MODEL = "first_model"  # nothing in production to compare with
    IDENTICAL = "identical"  # the candidate is the production model


def outcome_words(outcome: Outcome, *, margin: float = 0.0, max_regression: float = 0.0) -> str:
    """The verdict in words, e.g. "better, but below the auto-approve margin +1.000"."""
    match outcome:
        case Outcome.CLEARS_MARGIN:
            return f"better by at least the auto-approve margin {margin:+.3f}"
        case Outcome.BETTER_BELOW_MARGIN:
            return f"better, but below the auto-approve margin {margin:+.3f}"
        case Outcome.NO_DIFFERENCE:
            return "no detectable difference (the interval covers 0)"
        case Outcome.WORSE_WITHIN_LIMIT:
            return f"worse, but not beyond the allowed regression {-max_regression:+.3f}"
        case Outcome.WORSE_BEYOND_LIMIT:
            return f"worse beyond the allowed regression {-max_regression:+.3f}"
        case Outcome.FIRST_MODEL:
            return "first model: no production model to compare against"
        case Outcome.IDENTICAL:
            return "candidate is identical to the production model"


def verdict_parts(reason: str) -> tuple[str, str]:
    """(the outcome in words, the rest) of a verdict's reason, so a page can set the words apart: ("better, but
    below the auto-approve margin +1.000", "ndcg@5 +0.124 [95% CI +0.085, +0.164] over 120 questions; ...")."""
    words, _, rest = reason.partition(": ")
    return words, rest


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


# What the lists of changed questions are headed with, wherever they are shown.
CHANGED_HEADING = "Questions whose results changed most (rank of the relevant document: production → candidate)"


def changed_parts(item: Mapping[str, Any], *, compact: bool = False) -> tuple[str, str, str]:
    """(direction, question, ranks) of one changed question, e.g. ("better", "how do I rotate keys",
    "guide/a.md: 7 → 2"); compact (Slack) shortens the question and names one relevant document."""
    direction = str(item.get("direction") or "changed")
    question = str(item.get("question") or item.get("id") or "?")
    if compact and len(question) > _COMPACT_QUESTION:
        question = question[: _COMPACT_QUESTION - 1].rstrip() + "…"
    relevant = list(item.get("relevant") or [])
    depth = int(item.get("depth") or 0)
    shown = relevant[: 1 if compact else _RELEVANT_SHOWN]
    ranks = "; ".join(
        f"{r.get('document', '?')}: {_rank(r.get('production'), depth)} → {_rank(r.get('candidate'), depth)}"
        for r in shown
    )
    if len(relevant) > len(shown):
        ranks += f" (+{len(relevant) - len(shown)} more relevant)"
    return direction, question, ranks


def changed_lines(changed: Sequence[Mapping[str, Any]] | None, limit: int = 5, *, compact: bool = False) -> list[str]:
    """One line per question whose results changed most: better/worse/same, the question, then each relevant
    document's rank under production and under the candidate, e.g. 'better: “rotate keys” — guide/a.md: 7 → 2'."""
    lines = []
    for item in list(changed or [])[:limit]:
        direction, question, ranks = changed_parts(item, compact=compact)
        lines.append(f"{direction}: “{question}”" + (f" — {ranks}" if ranks else ""))
    return lines


_COMPACT_QUESTION = 80
_RELEVANT_SHOWN = 3


def _rank(rank: object, depth: int) -> str:
    if isinstance(rank, int) and not isinstance(rank, bool):
        return str(rank)
    return f"not in top {depth}" if depth else "not ranked"
