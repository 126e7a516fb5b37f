"""The YAML schema of an `ApprovalGate` (`defs/<name>/defs.yaml`): the gated asset, its evidence and auto-approve
rule, the approval policy (the fields of a pipeline's `approvals:` section, at the top level), and what runs on
approval."""

from __future__ import annotations

import dagster as dg
from pydantic import Field, model_validator

from runtime_ops.pipeline.approval_attributes import ApprovalAttributes


class OnApprovalAttributes(dg.Resolvable, dg.Model):
    materialize: list[str] | None = Field(
        default=None, description="Asset keys (a/b) materialized, as one run, once per approved request."
    )
    job: str | None = Field(default=None, description="A job of this project launched once per approved request.")

    @model_validator(mode="after")
    def _exactly_one(self) -> OnApprovalAttributes:
        if bool(self.materialize) == bool(self.job):
            raise ValueError("on_approval takes exactly one of materialize: [asset keys] or job: <job name>")
        return self


class GateAttributes(ApprovalAttributes):
    target: str = Field(description="The gated asset's key, parts joined by '/' (scoring/ticket_labels).")
    evidence: list[str] = Field(
        default_factory=list, description="Metadata fields of the target's materialization shown to approvers."
    )
    auto_approve: str | None = Field(
        default=None,
        description="A rule over the evidence that approves without a person (accuracy >= 0.92 and cost_usd < 50): "
        "field names, numbers, strings, comparisons, and/or/not, + - * /. A missing field waits for a person.",
    )
    name: str | None = Field(
        default=None, description="The gate's name (a-z, 0-9, _). Default: the target's key joined by '__'."
    )
    on_approval: OnApprovalAttributes = Field(description="What runs once per approved request.")
