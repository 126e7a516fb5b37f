"""The `gate:` section of a pipeline's defs.yaml, and how it fills in the gate's policy (`GatePolicy`).

A field left out falls back to its process-wide default (`Settings.gate_defaults`: RUNTIME_OPS_PRIMARY_METRIC, ...),
then to `GatePolicy`'s own default; a new gate setting is a field here and one on `GatePolicy`.
"""

from __future__ import annotations

from typing import Annotated

import dagster as dg
from pydantic import Field

from runtime_ops.pipeline.attribute_types import Fraction
from runtime_ops.policies.gate_policy import GatePolicy, OnlinePolicy
from runtime_ops.settings import Settings


class OnlineGateAttributes(dg.Resolvable, dg.Model):
    """`gate.online`: evidence from live traffic (the pipeline's `rollout:`) the gate may require."""

    required: bool = Field(
        default=OnlinePolicy.required,
        description="Auto-approve only when the online comparison (the rollout's interleaving, canary or shadow "
        "evidence) clears too; a first model has nothing to compare with and skips it.",
    )
    min_queries: int = Field(
        default=OnlinePolicy.min_queries,
        ge=1,
        description="Live queries the online comparison must count before it can decide.",
    )

    max_key_share: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        default=OnlinePolicy.max_key_share,
        description="The largest share of the decisive live queries one API key may contribute; a key above it is "
        "left out of the verdict (1.0: off, for a deployment whose every user comes through one application key).",
    )
    max_session_share: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        default=OnlinePolicy.max_session_share,
        description="The largest share of the decisive live queries one session may contribute; above it, left out.",
    )

    def policy(self) -> OnlinePolicy:
        return OnlinePolicy(
            required=self.required,
            min_queries=self.min_queries,
            max_key_share=self.max_key_share,
            max_session_share=self.max_session_share,
        )


class GateAttributes(dg.Resolvable, dg.Model):
    primary_metric: str | None = Field(
        default=None,
        description="Metric the gate compares (e.g. ndcg@5, recall@5, mrr). Default: RUNTIME_OPS_PRIMARY_METRIC.",
    )
    auto_approve_margin: Fraction | None = Field(
        default=None,
        description="Auto-approve when the interval's lower bound clears this margin. Default: "
        "RUNTIME_OPS_AUTO_APPROVE_MARGIN (0.02).",
    )
    max_regression: Fraction | None = Field(
        default=None,
        description="meets_policy fails when the whole interval lies below minus this. Default: "
        "RUNTIME_OPS_MAX_REGRESSION (0.05).",
    )
    confidence: Annotated[float, Field(ge=0.5, lt=1.0)] = Field(
        default=GatePolicy.confidence,
        description="Confidence of the paired bootstrap interval of candidate - production.",
    )
    resamples: int = Field(default=GatePolicy.resamples, ge=100, le=100_000, description="Bootstrap resamples.")
    online: OnlineGateAttributes = Field(
        default_factory=OnlineGateAttributes,
        description="Evidence from live traffic: {required: false, min_queries: 500, max_key_share: 0.5, "
        "max_session_share: 0.1}.",
    )

    def policy(self, settings: Settings) -> GatePolicy:
        """The pipeline's gate policy: each field as declared here, else its process-wide default, else the
        built-in one."""
        declared = {name: value for name, value in self if value is not None and name != "online"}
        return GatePolicy(**{**settings.gate_defaults, **declared}, online=self.online.policy())
