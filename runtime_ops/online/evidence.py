"""One rollout's online comparison and the verdict the gate and the ramp read (pure). Minimal canary form (the ramp
piece's stand-in until the fuller version of the contract lands): the candidate's positive-feedback rate minus
production's, with Newcombe's interval (`statistics.proportion_difference`); a request is positive when it got a
`click` or `helpful`. The verdict is "not enough queries" below `min_queries` candidate requests, else the
interval's ("better" above 0, "worse" below, "no difference yet" across)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runtime_ops.online.statistics import ProportionDifference, proportion_difference

EvidenceVerdict = Literal["better", "worse", "no difference yet", "not enough queries"]
POSITIVE_SIGNALS = ("click", "helpful")


@dataclass(frozen=True)
class OnlineInputs:
    """One rollout's requests per arm, and how many of them got a positive signal."""

    rollout_id: int | None = None
    candidate_requests: int = 0
    candidate_positive: int = 0
    production_requests: int = 0
    production_positive: int = 0


@dataclass(frozen=True)
class OnlineEvidence:
    mode: str
    queries: int
    min_queries: int
    verdict: EvidenceVerdict
    feedback_rate: ProportionDifference | None = None


def online_evidence(inputs: OnlineInputs, *, mode: str, min_queries: int, confidence: float = 0.95) -> OnlineEvidence:
    if mode != "canary":
        raise ValueError(f"this evidence reads canary rollouts only, not {mode!r}")
    rate = proportion_difference(
        inputs.candidate_positive,
        inputs.candidate_requests,
        inputs.production_positive,
        inputs.production_requests,
        confidence,
    )
    queries = inputs.candidate_requests
    verdict: EvidenceVerdict = "not enough queries" if queries < min_queries else rate.verdict
    return OnlineEvidence(mode, queries, min_queries, verdict, rate)
