"""The `approvals:` section of a pipeline's defs.yaml: who decides a candidate, how many, and by when (with its
escalation chain)."""

from __future__ import annotations

from typing import Annotated

import dagster as dg
from pydantic import Field, field_validator

from runtime_ops.durations import parse_duration


class EscalationTierAttributes(dg.Resolvable, dg.Model):
    approvers: list[str] = Field(min_length=1, description="Who else may decide from this tier's deadline on.")
    after: str = Field(description="How long after the request opened this tier joins (90s, 30m, 4h, 2d).")

    @field_validator("after")
    @classmethod
    def _check_after(cls, v: str) -> str:
        if parse_duration(v) is None:
            raise ValueError("a tier needs a duration, not off")
        return v


class ApprovalAttributes(dg.Resolvable, dg.Model):
    approvers: list[str] | None = Field(
        default=None, description="Slack user ids allowed to decide. Default: RUNTIME_OPS_APPROVERS (empty: anyone)."
    )
    escalation_approvers: list[str] | None = Field(
        default=None, description="Who is asked after escalate_after. Default: RUNTIME_OPS_ESCALATION_APPROVERS."
    )
    required_approvals: Annotated[int, Field(ge=1, le=20)] | None = Field(
        default=None,
        description="Distinct approvals needed (M of N). Default: RUNTIME_OPS_REQUIRED_APPROVALS.",
    )
    escalate_after: str | None = Field(
        default=None, description="Duration (90s, 30m, 4h, 2d or off). Default: RUNTIME_OPS_ESCALATE_AFTER (4h)."
    )
    expire_after: str | None = Field(
        default=None, description="Duration after which a request is rejected. Default: RUNTIME_OPS_EXPIRE_AFTER (24h)."
    )
    slack_channel: str | None = Field(
        default=None, description="Slack channel id for this pipeline's requests. Default: SLACK_APPROVAL_CHANNEL."
    )
    escalation: list[EscalationTierAttributes] | None = Field(
        default=None,
        description="An escalation chain: tiers of approvers, each joining when the request has waited its `after` "
        "(in increasing order, all before expire_after); the request expires (fail closed) after the last. "
        "Replaces escalation_approvers / escalate_after.",
    )

    @field_validator("escalate_after", "expire_after")
    @classmethod
    def _check_duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)
        return v
