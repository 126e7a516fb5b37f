"""The `rollout:` section of a pipeline's defs.yaml: how a candidate meets live traffic (resolved to `RolloutSpec`)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field, field_validator

from runtime_ops.durations import parse_duration
from runtime_ops.pipeline.spec import ROLLOUT_MODES, STICKY_KEYS, RolloutSpec, check_ramp


class RolloutAttributes(dg.Resolvable, dg.Model):
    mode: str = Field(
        default="off",
        description="off | shadow (a sampled share of queries also runs on the candidate, off the response path; "
        "what is served does not change) | interleave (a share of requests is served both models' results, "
        "team-draft interleaved, each item with its team) | canary (a sticky share of sessions is served by the "
        "candidate alone).",
    )
    share: float = Field(
        default=RolloutSpec.share, gt=0.0, le=1.0, description="Share of traffic in the rollout (0.05: 5%)."
    )
    sticky: str = Field(
        default=RolloutSpec.sticky,
        description="What keeps a caller on one arm: `session` (the request's session, else its request id); the "
        "only value for now.",
    )
    min_queries: int = Field(
        default=RolloutSpec.min_queries, ge=1, description="Live queries a comparison needs before it can decide."
    )
    max_duration: str = Field(
        default="7d", description="The longest a rollout runs before it stops by itself (90m, 12h, 7d)."
    )
    ramp: list[float] = Field(
        default_factory=lambda: list(RolloutSpec.ramp),
        description="After approval, the canary shares the candidate steps through before it is promoted; "
        "increasing, ending at 1.0 ([]: promote at once).",
    )
    max_loss: float = Field(
        default=RolloutSpec.max_loss,
        ge=0.0,
        lt=1.0,
        description="The largest drop of the positive-feedback rate (candidate - production, absolute) a ramp stage "
        "may leave possible and still pass: its interval's lower bound must be at least -max_loss (0.05: five "
        "points). Smaller is stricter and needs more queries per stage.",
    )

    @field_validator("mode")
    @classmethod
    def _check_mode(cls, v: str) -> str:
        if v not in ROLLOUT_MODES:
            raise ValueError(f"must be one of {', '.join(ROLLOUT_MODES)}")
        return v

    @field_validator("sticky")
    @classmethod
    def _check_sticky(cls, v: str) -> str:
        if v not in STICKY_KEYS:
            raise ValueError(f"only {', '.join(STICKY_KEYS)} is supported for now")
        return v

    @field_validator("max_duration")
    @classmethod
    def _check_duration(cls, v: str) -> str:
        if parse_duration(v) is None:
            raise ValueError("a rollout needs an end: give a duration such as 7d (not off)")
        return v

    @field_validator("ramp")
    @classmethod
    def _check_ramp(cls, v: list[float]) -> list[float]:
        check_ramp(v)
        return v

    def spec(self) -> RolloutSpec:
        duration = parse_duration(self.max_duration)
        assert duration is not None, "validated above"
        return RolloutSpec(
            mode=self.mode,
            share=self.share,
            sticky=self.sticky,
            min_queries=self.min_queries,
            max_duration=duration,
            ramp=tuple(self.ramp),
            max_loss=self.max_loss,
        )
