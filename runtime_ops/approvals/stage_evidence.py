"""A ramp stage's online evidence, computed in one place for the ramp that decides on it and for every channel that
shows it (glue over the query log; no Dagster).

A stage is one canary rollout row, judged on its own requests under the pipeline's `gate.online` limits (a dominant
key or session is left out; a split that does not match the share is not decisive). A stage at 100% of sessions has
no production arm of its own: its candidate is compared with production's requests in the ramp's earlier stages
(and the rollout beside the request while it waited), said in the evidence's caveat. With no such requests at all
the stage cannot pass: it waits, then halts at max_duration, and a person decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from runtime_ops.online.evidence import ArmRequests, EvidenceLimits, OnlineEvidence, online_evidence
from runtime_ops.online.rollout_plan import StageEvidence
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore
from runtime_ops.store.serving.rollouts import CANARY


@dataclass(frozen=True)
class StageRule:
    """What a stage's evidence is judged by: `rollout.min_queries` and `rollout.max_loss`, and `gate.online`'s
    limits on one key's or session's share."""

    min_queries: int = RolloutSpec.min_queries
    max_loss: float = RolloutSpec.max_loss
    limits: EvidenceLimits = field(default_factory=EvidenceLimits)

    @classmethod
    def of(cls, rollout: RolloutSpec | None, online: OnlinePolicy | None) -> StageRule:
        rollout, online = rollout or RolloutSpec(), online or OnlinePolicy()
        limits = EvidenceLimits(max_key_share=online.max_key_share, max_session_share=online.max_session_share)
        return cls(min_queries=rollout.min_queries, max_loss=rollout.max_loss, limits=limits)


def _merged(arms: list[ArmRequests]) -> ArmRequests:
    first = tuple(r for arm in arms for r in arm.first_positive)
    sources = tuple(s for arm in arms for s in (arm.sources or ()))
    return ArmRequests(first, sources if len(sources) == len(first) else ())


def stage_online_evidence(
    store: StateStore, stages: list[dict[str, Any]], index: int, rule: StageRule
) -> OnlineEvidence:
    """The evidence of `stages[index]` (rows of `store.rollouts.stages`, in order), as the ramp decides on it."""
    row = stages[index]
    inputs = store.query_log.online_inputs(int(row["id"]))
    caveat = None
    if float(row["share"]) >= 1.0:
        earlier = [int(s["id"]) for s in stages[:index]]
        beside = store.rollouts.for_request(str(row["approval_id"])) if row.get("approval_id") else None
        if beside is not None:
            earlier.insert(0, int(beside["id"]))
        baseline = _merged([store.query_log.online_inputs(i).production for i in earlier])
        # No split to check at 100%: the baseline is earlier traffic, not this stage's other arm.
        inputs = replace(inputs, production=baseline, share=None)
        caveat = (
            f"no production arm at 100% of sessions: compared with production's {baseline.requests} requests "
            "in the ramp's earlier stages"
        )
    found = online_evidence(inputs, mode=CANARY, min_queries=rule.min_queries, limits=rule.limits)
    if caveat is None:
        return found
    return replace(found, caveat=f"{caveat}; {found.caveat}" if found.caveat else caveat)


def plan_evidence(found: OnlineEvidence) -> StageEvidence:
    """What the stage machine (`online/rollout_plan.py`) reads of a stage's evidence."""
    rate = found.feedback_rate
    detail = ""
    if rate is not None:
        detail = (
            f"positive-feedback rate {rate.candidate_positive}/{rate.candidate_n} vs production's "
            f"{rate.production_positive}/{rate.production_n}, difference {rate.difference:+.3f} "
            f"[{rate.confidence:.0%} CI {rate.interval.low:+.3f}, {rate.interval.high:+.3f}]"
        )
    if found.caveat:
        detail = f"{detail}; {found.caveat}" if detail else found.caveat
    low = rate.interval.low if rate is not None and rate.production_n else None
    return StageEvidence(found.verdict, found.queries, found.min_queries, detail, low)
