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

Who the evidence comes from (`online/concentration.py`): a session's repeats of one query count once (same session
hash and query hash: one observation; interleaved, the group's wins and losses net out; canary, it is positive when
any of them was), and the evidence reports the largest key's and session's shares of the decisive observations
(interleaved queries with a win or a loss; canary requests with a positive signal). Given `limits` (the gate's
`gate.online` declaration), a dominant key or session (above `max_key_share` / `max_session_share`) is left out, and
the verdict is the rest's; when the rest is too few to decide, the verdict is "not decisive", with the reason. So is
it when the rollout's split of traffic does not match its declared share beyond chance (`online/sample_ratio.py`):
then no comparison of the arms can be trusted.

The verdict: "not enough queries" below `min_queries` (a loss "with confidence" needs the count as well as the
interval, and so does a win), else the deciding interval's: "better" above 0, "worse" below, "no difference yet"
across it ("not decisive" as above). Shadow never decides: its verdict is "not enough queries" or "no difference
yet", and `decides` is False.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runtime_ops.online.concentration import Concentration, Source, concentration, dedupe, dominant
from runtime_ops.online.credit import Outcome, credit
from runtime_ops.online.sample_ratio import SampleRatio, sample_ratio
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
    "EvidenceLimits",
    "EvidenceVerdict",
    "InterleavedQuery",
    "OnlineEvidence",
    "OnlineInputs",
    "ShadowSums",
    "online_evidence",
]

EvidenceVerdict = Literal["better", "worse", "no difference yet", "not enough queries", "not decisive"]
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
    source: Source = field(default_factory=Source)


@dataclass(frozen=True)
class ArmRequests:
    """The requests one arm answered alone: per request, the rank of its first positive signal (None: none), and
    who made it (`sources`, in the same order; empty: not known)."""

    first_positive: tuple[int | None, ...] = ()
    sources: tuple[Source, ...] = ()

    def observations(self) -> list[tuple[int | None, Source]]:
        sources = self.sources or tuple(Source() for _ in self.first_positive)
        return list(zip(self.first_positive, sources, strict=True))

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
    share: float | None = None  # the rollout's declared share (None: not known, no sample-ratio check)

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
    concentration: Concentration | None = None  # of the decisive observations, before any was left out
    sample_ratio: SampleRatio | None = None
    left_out: int = 0  # decisive observations of dominant keys or sessions, not in the verdict
    caveat: str | None = None  # why the evidence was not (or not all) counted: domination, sample-ratio mismatch

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
        if self.concentration is not None:
            out["concentration"] = {**self.concentration.to_dict(), "left_out": self.left_out}
        if self.sample_ratio is not None:
            out["sample_ratio"] = self.sample_ratio.to_dict()
        if self.caveat is not None:
            out["caveat"] = self.caveat
        return out


def _interval(interval: Interval) -> dict[str, float]:
    return {"low": interval.low, "high": interval.high}


@dataclass(frozen=True)
class EvidenceLimits:
    """How much of the decisive evidence one key or one session may contribute (`gate.online`)."""

    max_key_share: float = 1.0
    max_session_share: float = 1.0


def _net(outcomes: list[Outcome]) -> Outcome:
    """One session's outcomes on one query, as one: the side it preferred more often."""
    balance = outcomes.count("win") - outcomes.count("loss")
    return "win" if balance > 0 else "loss" if balance < 0 else "tie"


def _interleaved(queries: Sequence[InterleavedQuery]) -> list[tuple[Outcome, Source]]:
    """Each clicked interleaved query's outcome, a session's repeats of one query netted into one."""
    clicked: list[tuple[Outcome, Source]] = []
    for q in queries:
        credited = credit(q.teams, q.clicked, CREDIT_RULE, shared=min(q.shared, len(q.teams)))
        if credited is not None:  # a query without a click carries no preference (credit.py)
            clicked.append((credited.outcome, q.source))
    return dedupe(clicked, lambda o: o[1], lambda group: (_net([o for o, _ in group]), group[0][1]))


def _arm(requests: ArmRequests) -> list[tuple[int | None, Source]]:
    """One arm's requests, a session's repeats of one query as one: positive when any was, at its best rank."""

    def combine(group: list[tuple[int | None, Source]]) -> tuple[int | None, Source]:
        ranks = [r for r, _ in group if r is not None]
        return (min(ranks) if ranks else None, group[0][1])

    return dedupe(requests.observations(), lambda o: o[1], combine)


def _units(requests: ArmRequests) -> int:
    """The canary's units of assignment among an arm's requests: its sessions, a request without one its own."""
    sources = requests.sources
    named = {s.session for s in sources if s.session is not None}
    return len(named) + sum(1 for s in sources if s.session is None) + (requests.requests - len(sources))


def _sample_ratio(inputs: OnlineInputs, mode: str) -> SampleRatio | None:
    if inputs.share is None or mode == "shadow":
        return None
    if mode == "interleave":
        return sample_ratio(len(inputs.interleaved), inputs.production.requests, inputs.share)
    return sample_ratio(_units(inputs.candidate), _units(inputs.production), inputs.share)


def _share_text(share: float, what: str) -> str:
    return f"evidence dominated by one {what} ({share:.0%} of decisive queries)"


def online_evidence(
    inputs: OnlineInputs,
    *,
    mode: str,
    min_queries: int,
    confidence: float = 0.95,
    limits: EvidenceLimits | None = None,
) -> OnlineEvidence:
    """The online comparison of `inputs` for a rollout in `mode`, and its verdict (see the module docstring).
    `limits`: leave out dominant keys and sessions, and check the split (None: count everything as it is)."""
    if mode not in MODES:
        raise ValueError(f"rollout mode {mode!r} has no online evidence: use one of {', '.join(MODES)}")
    if isinstance(min_queries, bool) or not isinstance(min_queries, int) or min_queries < 1:
        raise ValueError(f"min_queries must be a positive integer, got {min_queries!r}")
    interleaved = _interleaved(inputs.interleaved)
    candidate, production = _arm(inputs.candidate), _arm(inputs.production)
    decisive = (
        [src for o, src in interleaved if o != "tie"]
        if mode == "interleave"
        else [src for r, src in (*candidate, *production) if r is not None]
    )
    spread = concentration(decisive) if mode != "shadow" else None
    caveats: list[str] = []
    left_out = 0
    before = len(interleaved) if mode == "interleave" else len(candidate)  # the deciding count, all counted
    if limits is not None and spread is not None:
        keys, sessions = dominant(
            decisive, max_key_share=limits.max_key_share, max_session_share=limits.max_session_share
        )

        def kept(src: Source) -> bool:
            return src.key_name not in keys and (src.session is None or src.session not in sessions)

        left_out = sum(1 for src in decisive if not kept(src))
        if keys:
            caveats.append(_share_text(spread.top_key_share, "key"))
        if sessions:
            caveats.append(_share_text(spread.top_session_share, "session"))
        interleaved = [o for o in interleaved if kept(o[1])]
        candidate, production = [o for o in candidate if kept(o[1])], [o for o in production if kept(o[1])]
    split = _sample_ratio(inputs, mode) if limits is not None else None
    pref = preference([o for o, _ in interleaved], confidence) if inputs.interleaved else None
    rate = mrr = None
    if candidate:
        c, p = [r for r, _ in candidate], [r for r, _ in production]
        rate = proportion_difference(_positive(c), len(c), _positive(p), len(p), confidence)
        mrr = mean_difference(_reciprocal(c), _reciprocal(p), confidence)
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
        queries = len(candidate)
        verdict = rate.verdict if rate is not None and queries >= min_queries else "not enough queries"
    else:
        queries = sums.queries
        verdict = "no difference yet" if queries >= min_queries else "not enough queries"
    if left_out:
        caveats[-1] += f": {'its' if len(caveats) == 1 else 'their'} {left_out} decisive queries are left out"
        if verdict == "not enough queries" and before >= min_queries:
            verdict = "not decisive"  # enough queries, but not enough that no one client dominates
            caveats[-1] += f", and the other {queries} are too few to decide (min_queries {min_queries})"
    if split is not None and split.mismatch:
        caveats.append(split.text())
        if mode != "shadow":
            verdict = "not decisive"
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
        concentration=spread,
        sample_ratio=split,
        left_out=left_out,
        caveat="; ".join(caveats) or None,
    )


def _positive(first_positive: list[int | None]) -> int:
    return sum(1 for r in first_positive if r is not None)


def _reciprocal(first_positive: list[int | None]) -> list[float]:
    return [1.0 / r if r is not None else 0.0 for r in first_positive]
