"""The ramp's stage machine (pure: no Dagster, no I/O): what an approved candidate's ramp does next, decided from
the active stage's online evidence.

A ramp is a canary that grows (Argo-style): stage i serves the candidate to a sticky `ramp[i]` share of sessions.
A stage passes when its evidence shows no loss with enough queries ("better", or "no difference yet" with at least
`min_queries`); then the next stage starts, and after the last one the promotion launches. A loss ("worse", which the
evidence reports only with enough queries) rolls the ramp back. A stage whose deadline (max_duration) passes without
enough queries halts the ramp: the candidate is never promoted silently, a person retries or promotes by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The verdicts of `online/evidence.py` (`EvidenceVerdict`), spelled here so the machine does not need the evidence.
BETTER, WORSE, NO_DIFFERENCE, NOT_ENOUGH = "better", "worse", "no difference yet", "not enough queries"
# Evidence one key or session dominates, or whose split does not match its share: the stage waits (then halts).
NOT_DECISIVE = "not decisive"
VERDICTS = (BETTER, WORSE, NO_DIFFERENCE, NOT_ENOUGH, NOT_DECISIVE)

Action = Literal["wait", "advance", "promote", "roll back", "halt"]


@dataclass(frozen=True)
class StageEvidence:
    """What the machine reads of a stage's online evidence: its verdict and the query counts behind it."""

    verdict: str
    queries: int
    min_queries: int
    detail: str = ""  # the deciding signal in words, for the stage's reason (e.g. the rates and their interval)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"evidence verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")


@dataclass(frozen=True)
class Step:
    """What to do with the active stage: `action`, the stage and share that starts next (advance only), and why."""

    action: Action
    reason: str
    next_stage: int | None = None
    next_share: float | None = None


def no_loss(evidence: StageEvidence) -> bool:
    """A stage passes: better, or no difference with at least min_queries (a loss is reported only with them)."""
    if evidence.verdict == BETTER:
        return True
    return evidence.verdict == NO_DIFFERENCE and evidence.queries >= evidence.min_queries


def next_step(stage: int, ramp: tuple[float, ...], evidence: StageEvidence, *, overdue: bool) -> Step:
    """The next move of a ramp whose active stage is `stage` (an index into `ramp`), given its evidence and whether
    its max_duration has passed."""
    if not 0 <= stage < len(ramp):
        raise ValueError(f"ramp stage {stage} is outside the ramp {list(ramp)}")
    where = f"stage {stage + 1}/{len(ramp)} ({ramp[stage]:.0%} of sessions)"
    counted = f"{evidence.queries} queries, min_queries {evidence.min_queries}"
    if evidence.detail:
        counted = f"{evidence.detail}; {counted}"
    if evidence.verdict == WORSE:
        return Step("roll back", f"{where}: the candidate loses online ({counted})")
    if no_loss(evidence):
        passed = f"{where} passed: {evidence.verdict} ({counted})"
        if stage + 1 == len(ramp):
            return Step("promote", passed)
        return Step("advance", passed, next_stage=stage + 1, next_share=ramp[stage + 1])
    if overdue:
        return Step("halt", f"{where} reached max_duration with {evidence.verdict} ({counted})")
    return Step("wait", f"{where}: {evidence.verdict} ({counted})")
