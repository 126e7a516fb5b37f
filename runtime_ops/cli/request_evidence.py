"""The evidence of an approval request in the terminal (`approvals show`, `status`): the offline verdict, the online
lines and the ramp's stage results, as the approval page and the Slack message show them; and the JSON of it
(`approvals show --json`, `approvals list --json`)."""

from __future__ import annotations

from typing import Any

from runtime_ops.approvals.evidence_doc import evidence_doc, stage_results
from runtime_ops.approvals.stage_evidence import StageRule
from runtime_ops.components.loading import PipelineConfigError, get_spec
from runtime_ops.online.stage_results import ramp_outcome
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore


def policies(pipeline: str | None) -> tuple[OnlinePolicy, StageRule]:
    """The pipeline's online policy and what a ramp stage is judged by (the defaults when it is no longer
    declared)."""
    try:
        spec = get_spec(pipeline) if pipeline else None
    except PipelineConfigError:
        spec = None
    if spec is None:
        return OnlinePolicy(), StageRule()
    return spec.gate.online, StageRule.of(spec.rollout, spec.gate.online)


def evidence_json(store: StateStore, request: dict[str, Any], *, live: bool = True) -> dict[str, Any] | None:
    online, stage_rule = policies(request.get("pipeline"))
    return evidence_doc(store, request, online=online, stage_rule=stage_rule, live=live)


def ramp_lines(store: StateStore, request: dict[str, Any]) -> list[str]:
    """The ramp's outcome and one line per stage with its counts, interval and verdict ([] without a ramp)."""
    stages = store.rollouts.stages(request["id"])
    if not stages:
        return []
    _, stage_rule = policies(request.get("pipeline"))
    return [f"ramp: {ramp_outcome(stages)}"] + [f"  {r.line()}" for r in stage_results(store, stages, stage_rule)]


def evidence_lines(store: StateStore, request: dict[str, Any], evidence: dict[str, Any]) -> list[str]:
    """A model candidate's evidence in lines: the offline verdict, the online half, then the ramp."""
    lines = []
    offline = evidence.get("offline") or {}
    if offline.get("verdict"):
        lines.append(f"offline: {offline['verdict']}")
    lines += [f"online: {line}" for line in (evidence.get("online") or {}).get("lines") or []]
    return lines + ramp_lines(store, request)
