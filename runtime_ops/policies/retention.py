"""Which model versions keep their vector index and stored vectors (pure: no I/O).

Never collected: the production model, every earlier production model a rollback could return to within the
last `keep_previous` promotions, the candidate (its evaluation and promotion read its vectors), and any version an
approval request still waits on. Of the rest, the newest `keep_recent` are kept as well; everything older goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RetentionPolicy:
    keep_recent: int = 2  # newest versions kept besides the protected ones
    keep_previous: int = 1  # earlier production models kept as rollback targets


@dataclass(frozen=True)
class RetentionPlan:
    keep: frozenset[int]
    collect: tuple[int, ...]  # oldest first
    reasons: dict[int, str]  # why each kept version is kept


def plan_retention(
    versions: Iterable[int],
    *,
    production: int | None,
    production_history: Sequence[int],
    candidate: int | None,
    pending: Iterable[int] = (),
    policy: RetentionPolicy = RetentionPolicy(),
) -> RetentionPlan:
    """`production_history`: the production alias's targets, oldest first (the current one last)."""
    every = sorted(set(versions))
    reasons: dict[int, str] = {}
    if production is not None:
        reasons[production] = "production"
    previous = [v for v in reversed(production_history) if v != production]
    for v in list(dict.fromkeys(previous))[: policy.keep_previous]:
        reasons.setdefault(v, "rollback target")
    if candidate is not None:
        reasons.setdefault(candidate, "candidate")
    for v in pending:
        reasons.setdefault(v, "awaiting approval")
    rest = [v for v in every if v not in reasons]
    for v in rest[len(rest) - policy.keep_recent :] if policy.keep_recent else []:
        reasons[v] = "recent"
    collect = tuple(v for v in every if v not in reasons)
    return RetentionPlan(frozenset(reasons), collect, reasons)
