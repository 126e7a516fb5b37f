"""One rollout's online comparison of its candidate with production, and the one verdict the gate reads (pure).

`OnlineInputs` is what a rollout's query records and their feedback reduce to (`QueryLog.online_inputs` reads it);
`online_evidence` turns it into every signal the rollout has, each with its query count, and one verdict from the
signal its mode decides by:
- interleave: the interleaving preference (`credit` by `examined_prefix`; clicks on the rankings' shared leading
  prefix credit neither team), counted over interleaved requests with a positive signal;
- canary: the candidate's positive-feedback rate minus production's (Newcombe interval), counted over the
  candidate's own requests (the smaller arm is what limits the interval);
- shadow: nothing decides. Overlap and latency inform; they never say which model helps people more.

A positive signal is a `click` or `helpful` feedback on a shown item (`POSITIVE_SIGNALS`); `not_helpful` is not
one. A request is *positive* when it got at least one; the positive-feedback rate of an arm is its positive
requests over all the requests it answered (one that showed nothing cannot be positive: showing nothing is a miss).
Click MRR is the mean over an arm's requests of 1 / the rank of its first positive signal (0 without one).

The verdict: "not enough queries" below `min_queries` (a loss "with confidence" needs the count as well as the
interval, and so does a win), else the deciding interval's: "better" above 0, "worse" below, "no difference yet"
across it. Shadow never decides: its verdict is "not enough queries" or "no difference yet", and `decides` is False.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runtime_ops.online.credit import credit
from runtime_ops.online.statistics import (
    Interval,
    MeanDifference,
    Preference,
    ProportionDifference,
    Shadow,
    mean_difference,
    preference,
    proportion_difference,
    shadow_from_sums,
)

__all__ = [
    "CREDIT_RULE",
    "POSITIVE_SIGNALS",
    "ArmRequests",
    "EvidenceVerdict",
    "InterleavedQuery",
    "OnlineEvidence",
    "OnlineInputs",
    "ShadowSums",
    "online_evidence",
]

EvidenceVerdict = Literal["better", "worse", "no difference yet", "not enough queries"]
POSITIVE_SIGNALS = ("click", "helpful")
CREDIT_RULE = "examined_prefix"
MODES = ("shadow", "interleave", "canary")
_DECIDED_BY = {
    "interleave": "interleaving preference",
    "canary": "positive-feedback rate",
    "shadow": "nothing (shadow informs only)",
}


@dataclass(frozen=True)
class InterleavedQuery:
    """One interleaved request: the team of each shown rank, the ranks with a positive signal, and how many leading
    ranks both rankings shared (0 when not recorded: every click then credits a team)."""

    teams: tuple[str, ...]
    clicked: tuple[int, ...] = ()
    shared: int = 0


@dataclass(frozen=True)
class ArmRequests:
    """The requests one arm answered alone: per request, the rank of its first positive signal (None: none)."""

    first_positive: tuple[int | None, ...] = ()

    @property
    def requests(self) -> int:
        return len(self.first_positive)

    @property
    def positive(self) -> int:
        return sum(1 for r in self.first_positive if r is not None)

    def reciprocal_ranks(self) -> list[float]:
        return [1.0 / r if r is not None else 0.0 for r in self.first_positive]


@dataclass(frozen=True)
class ShadowSums:
    """A rollout row's running sums over its shadowed requests (`Rollouts.record_shadow`); `k` the requests' k."""

    queries: int = 0
    overlap_sum: float = 0.0
    overlap_sq_sum: float = 0.0
    log_latency_ratio_sum: float = 0.0
    log_latency_ratio_sq_sum: float = 0.0
    k: int = 10


@dataclass(frozen=True)
class OnlineInputs:
    """Everything about one rollout that its evidence needs: its interleaved requests, the requests each arm
    answered alone (production's include those outside the rollout's share, while it ran), and its shadow sums."""

    rollout_id: int | None = None
    interleaved: tuple[InterleavedQuery, ...] = ()
    candidate: ArmRequests = field(default_factory=ArmRequests)
    production: ArmRequests = field(default_factory=ArmRequests)
    shadow: ShadowSums = field(default_factory=ShadowSums)

    @property
    def requests(self) -> int:
        """Requests logged under the rollout, whichever arm served them."""
        return len(self.interleaved) + self.candidate.requests + self.production.requests


@dataclass(frozen=True)
class OnlineEvidence:
    """The online comparison of one rollout. `queries` and `verdict` are the deciding signal's (see the module
    docstring); the other signals are shown beside it, each with its own count, or None when the rollout has none
    of their requests."""

    mode: str
    queries: int
    min_queries: int
    verdict: EvidenceVerdict
    decided_by: str
    requests: int
    rollout_id: int | None = None
    preference: Preference | None = None
    feedback_rate: ProportionDifference | None = None
    click_mrr: MeanDifference | None = None
    shadow: Shadow | None = None

    @property
    def decides(self) -> bool:
        """Whether this evidence may decide for or against the candidate (shadow never does)."""
        return self.mode != "shadow"

    @property
    def missing(self) -> int:
        """How many more queries the deciding signal needs before it may decide."""
        return max(0, self.min_queries - self.queries)

    @property
    def confident_loss(self) -> bool:
        return self.decides and self.verdict == "worse"

    @property
    def confident_win(self) -> bool:
        return self.decides and self.verdict == "better"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, for reports, pages and audit details."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "rollout_id": self.rollout_id,
            "queries": self.queries,
            "min_queries": self.min_queries,
            "verdict": self.verdict,
            "decided_by": self.decided_by,
            "requests": self.requests,
        }
        if self.preference is not None:
            p = self.preference
            out["preference"] = {"wins": p.wins, "ties": p.ties, "losses": p.losses, "delta": p.delta,
                                 **_interval(p.interval), "queries": p.queries}  # fmt: skip
        if self.feedback_rate is not None:
            r = self.feedback_rate
            out["feedback_rate"] = {
                "candidate": [r.candidate_positive, r.candidate_n],
                "production": [r.production_positive, r.production_n],
                "difference": r.difference,
                **_interval(r.interval),
            }
        if self.click_mrr is not None:
            m = self.click_mrr
            out["click_mrr"] = {"candidate": m.candidate.mean, "production": m.production.mean,
                                "difference": m.difference, **_interval(m.interval), "queries": m.queries}  # fmt: skip
        if self.shadow is not None:
            s = self.shadow
            out["shadow"] = {"queries": s.queries, "k": s.k, "overlap": s.overlap.mean,
                             "latency_ratio": s.latency_ratio, **_interval(s.latency_interval)}  # fmt: skip
        return out


def _interval(interval: Interval) -> dict[str, float]:
    return {"low": interval.low, "high": interval.high}


def _preference(queries: Sequence[InterleavedQuery], confidence: float) -> Preference | None:
    if not queries:
        return None
    outcomes = []
    for q in queries:
        credited = credit(q.teams, q.clicked, CREDIT_RULE, shared=min(q.shared, len(q.teams)))
        if credited is not None:  # a query without a click carries no preference (credit.py)
            outcomes.append(credited.outcome)
    return preference(outcomes, confidence)


def online_evidence(inputs: OnlineInputs, *, mode: str, min_queries: int, confidence: float = 0.95) -> OnlineEvidence:
    """The online comparison of `inputs` for a rollout in `mode`, and its verdict (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"rollout mode {mode!r} has no online evidence: use one of {', '.join(MODES)}")
    if isinstance(min_queries, bool) or not isinstance(min_queries, int) or min_queries < 1:
        raise ValueError(f"min_queries must be a positive integer, got {min_queries!r}")
    pref = _preference(inputs.interleaved, confidence)
    rate = mrr = None
    if inputs.candidate.requests:
        c, p = inputs.candidate, inputs.production
        rate = proportion_difference(c.positive, c.requests, p.positive, p.requests, confidence)
        mrr = mean_difference(c.reciprocal_ranks(), p.reciprocal_ranks(), confidence)
    sums = inputs.shadow
    shadowed = None
    if sums.queries:
        shadowed = shadow_from_sums(
            sums.queries, sums.overlap_sum, sums.overlap_sq_sum, sums.log_latency_ratio_sum,
            sums.log_latency_ratio_sq_sum, sums.k, confidence,
        )  # fmt: skip
    verdict: EvidenceVerdict
    if mode == "interleave":
        queries = pref.queries if pref is not None else 0
        verdict = pref.verdict if pref is not None and queries >= min_queries else "not enough queries"
    elif mode == "canary":
        queries = inputs.candidate.requests
        verdict = rate.verdict if rate is not None and queries >= min_queries else "not enough queries"
    else:
        queries = sums.queries
        verdict = "no difference yet" if queries >= min_queries else "not enough queries"
    return OnlineEvidence(
        mode=mode,
        queries=queries,
        min_queries=min_queries,
        verdict=verdict,
        decided_by=_DECIDED_BY[mode],
        requests=inputs.requests,
        rollout_id=inputs.rollout_id,
        preference=pref,
        feedback_rate=rate,
        click_mrr=mrr,
        shadow=shadowed,
    )
