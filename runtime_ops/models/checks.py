"""The gate, as blocking asset checks on evaluation_report."""

import dagster as dg

from runtime_ops import clock
from runtime_ops.approvals.gate import evaluate_gate
from runtime_ops.models.assets import evaluation_report
from runtime_ops.observability.steps import observed
from runtime_ops.resources.state import ApprovalsResource, StateStoreResource


def _requester(context: dg.AssetCheckExecutionContext) -> str:
    tags = context.run.tags
    return tags.get("runtime_ops/requested_by") or tags.get("user") or tags.get("dagster/user") or "runtime_ops"


@dg.asset_check(
    asset=evaluation_report,
    blocking=True,
    description="The candidate does not regress past the allowed margin (RUNTIME_OPS_MAX_REGRESSION).",
)
@observed
def meets_policy(state: StateStoreResource) -> dg.AssetCheckResult:
    report = state.store().latest_eval_report()
    if report is None:
        return dg.AssetCheckResult(passed=False, description="no evaluation report yet")
    verdict = report["verdict"]
    return dg.AssetCheckResult(
        passed=bool(verdict["meets_policy"]),
        description=verdict["reason"],
        metadata={"candidate_version": report["candidate_version"], "reason": verdict["reason"]},
    )


@dg.asset_check(
    asset=evaluation_report,
    blocking=True,
    description="Passes when the policy auto-approves the candidate or a person approved this exact candidate "
    "digest; otherwise opens one approval request per digest and fails with how to decide it.",
)
@observed
def human_approval(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, approvals: ApprovalsResource
) -> dg.AssetCheckResult:
    outcome = evaluate_gate(
        state.store(),
        requested_by=_requester(context),
        run_id=context.run.run_id,
        policy=approvals.request_policy(),
        now=clock.now(),
    )
    metadata: dict[str, object] = {"status": outcome.status}
    if outcome.request:
        metadata["approval_id"] = outcome.request["id"]
        metadata["candidate_digest"] = outcome.request["candidate_digest"]
    if not outcome.passed:
        context.log.warning(outcome.message)
    return dg.AssetCheckResult(passed=outcome.passed, description=outcome.message, metadata=metadata)
