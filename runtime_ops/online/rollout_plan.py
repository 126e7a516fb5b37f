"""The ramp's stage machine (pure: no Dagster, no I/O): what an approved candidate's ramp does next, decided from
the active stage's online evidence.

A ramp is a canary that grows (Argo-style): stage i serves the candidate to a sticky `ramp[i]` share of sessions.
A stage passes when its evidence rules out a loss with enough queries: "better", or "no difference yet" with at
least `min_queries` *and* the interval's lower bound no lower than `-max_loss` (non-inferiority: "no difference yet"
alone only says the interval crosses 0, which a clearly worse candidate with too few queries also shows). Then the
next stage starts, and after the last one the promotion launches. A loss ("worse", which the evidence reports only
with enough queries) rolls the ramp back. A stage whose deadline (max_duration) passes without
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
    low: float | None = None  # the deciding interval's lower bound (candidate - production); None: no interval

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


def no_loss(evidence: StageEvidence, max_loss: float) -> bool:
    """A stage passes: better, or no difference with at least min_queries whose interval rules out a loss larger
    than `max_loss` (a loss is reported only with min_queries)."""
    if evidence.verdict == BETTER:
        return True
    return (
        evidence.verdict == NO_DIFFERENCE
        and evidence.queries >= evidence.min_queries
        and evidence.low is not None
        and evidence.low >= -max_loss
    )


def _unsure(evidence: StageEvidence, max_loss: float) -> str:
    """Why "no difference yet" with enough queries does not pass yet ("" when that is not the case)."""
    if evidence.verdict != NO_DIFFERENCE or evidence.queries < evidence.min_queries:
        return ""
    low = "no interval" if evidence.low is None else f"the interval reaches {evidence.low:+.3f}"
    return f", but a loss larger than max_loss {max_loss:g} is not ruled out ({low})"


def next_step(stage: int, ramp: tuple[float, ...], evidence: StageEvidence, *, overdue: bool, max_loss: float) -> Step:
    """The next move of a ramp whose active stage is `stage` (an index into `ramp`), given its evidence, whether
    its max_duration has passed, and the largest loss (candidate - production) a passing stage may leave possible."""
    if not 0 <= stage < len(ramp):
        raise ValueError(f"ramp stage {stage} is outside the ramp {list(ramp)}")
    if not 0.0 <= max_loss < 1.0:
        raise ValueError(f"max_loss must be in [0, 1), got {max_loss!r}")
    where = f"stage {stage + 1}/{len(ramp)} ({ramp[stage]:.0%} of sessions)"
    counted = f"{evidence.queries} queries, min_queries {evidence.min_queries}"
    if evidence.detail:
        counted = f"{evidence.detail}; {counted}"
    if evidence.verdict == WORSE:
        return Step("roll back", f"{where}: the candidate loses online ({counted})")
    if no_loss(evidence, max_loss):
        passed = f"{where} passed: {evidence.verdict} ({counted})"
        if stage + 1 == len(ramp):
            return Step("promote", passed)
        return Step("advance", passed, next_stage=stage + 1, next_share=ramp[stage + 1])
    unsure = _unsure(evidence, max_loss)
    if overdue:
        return Step("halt", f"{where} reached max_duration with {evidence.verdict}{unsure} ({counted})")
    return Step("wait", f"{where}: {evidence.verdict}{unsure} ({counted})")
