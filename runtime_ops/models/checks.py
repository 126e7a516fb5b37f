"""The gate, as blocking asset checks on a pipeline's evaluation_report."""

from typing import TYPE_CHECKING, Any

import dagster as dg

from runtime_ops import clock
from runtime_ops.approvals.gate import evaluate_gate
from runtime_ops.labels import version_label
from runtime_ops.models.evaluate import quality_metadata
from runtime_ops.models.history import set_label
from runtime_ops.models.sensors import RETRAIN_KEY_TAG, RETRAIN_TRIGGER_TAG
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.gate_text import changed_lines
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.runs import ALERT_TAG
from runtime_ops.store import StateStore
from runtime_ops.store.alerts import alert_requester

if TYPE_CHECKING:
    from runtime_ops.policies.approvals import RequestPolicy


SYSTEM = "system"


def _requester(context: dg.AssetCheckExecutionContext, store: StateStore) -> str:
    """Who asked for this candidate, from an authenticated record only: the operator of the retrain request
    (their key's approver id) or the alert rule that consumed into this run; otherwise the system (a policy
    trigger or a run launched in the Dagster UI, which has no users to authenticate). Run tags are not evidence:
    whoever launches a run writes them."""
    tags = context.run.tags
    trigger, run_key, alert_key = tags.get(RETRAIN_TRIGGER_TAG), tags.get(RETRAIN_KEY_TAG), tags.get(ALERT_TAG)
    if trigger in ("manual", "alert") and run_key:
        request = store.retraining.request_for_run(run_key)
        if request is not None and request.get("requested_by"):
            return str(request["requested_by"])
    if trigger == "alert" and alert_key:
        alert = store.alerts.alert_for_run(alert_key)
        if alert is not None:
            return alert_requester(alert)
    return SYSTEM


def build_gate_checks(spec: PipelineSpec, evaluation_report: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(
        asset=evaluation_report,
        name="meets_policy",
        blocking=True,
        description=f"The candidate does not regress by more than {spec.gate.max_regression} on "
        f"{spec.gate.primary_metric} (gate.max_regression).",
    )
    @observed
    def meets_policy(state: StateStoreResource) -> dg.AssetCheckResult:
        report = state.store().scoped(spec.name).evaluations.latest_eval_report()
        if report is None:
            return dg.AssetCheckResult(passed=False, description="no evaluation report yet")
        verdict = report["verdict"]
        metadata: dict[str, dg.MetadataValue | str | int] = {
            "candidate_version": f"v{report['candidate_version']}",
            "production_version": version_label(report["production_version"]),
            "reason": verdict["reason"],
            # The numbers the verdict compared: both models on one question set (production re-scored on it).
            **quality_metadata(report["candidate_metrics"], "candidate/"),
            **quality_metadata(report["production_metrics"] or {}, "production/"),
        }
        interval = verdict.get("interval")
        if interval:
            metadata.update(
                {
                    "ci_low": dg.MetadataValue.float(float(interval["low"])),
                    "ci_high": dg.MetadataValue.float(float(interval["high"])),
                    "mean_delta": dg.MetadataValue.float(float(interval["mean_delta"])),
                    "confidence": dg.MetadataValue.float(float(interval["confidence"])),
                    "questions": str(int(interval["n"])),
                }
            )
        if verdict.get("changed_questions"):
            metadata["changed_most"] = dg.MetadataValue.md(
                "\n".join(f"- {line}" for line in changed_lines(verdict["changed_questions"]))
            )
        if verdict.get("question_set"):
            questions = report["candidate_metrics"].get("questions")
            metadata["question_set"] = set_label(verdict["question_set"], int(questions) if questions else None)
        return dg.AssetCheckResult(
            passed=bool(verdict["meets_policy"]), description=verdict["reason"], metadata=metadata
        )

    @dg.asset_check(
        asset=evaluation_report,
        name="human_approval",
        blocking=True,
        description="Passes when the policy auto-approves the candidate or a person approved this exact candidate "
        "digest; otherwise opens one approval request per digest and reports it pending: a warning (Dagster "
        "labels it Failed with a yellow icon) naming the request, its deadline and how to decide it, which "
        "neither fails the run nor the assets after it. Fails (an error) only for a rejected or expired request.",
    )
    @observed
    def human_approval(context: dg.AssetCheckExecutionContext, state: StateStoreResource) -> dg.AssetCheckResult:
        store = state.store().scoped(spec.name)
        outcome = evaluate_gate(
            store,
            requested_by=_requester(context, store),
            run_id=context.run.run_id,
            policy=request_policy(spec),
            now=clock.now(),
        )
        metadata: dict[str, dg.MetadataValue | str] = {"status": outcome.status}
        if outcome.request:
            metadata["approval_id"] = outcome.request["id"]
            metadata["candidate_digest"] = outcome.request["candidate_digest"]
        if outcome.status == "pending" and outcome.request:
            # Waiting for a person is the gate working, not a failure: a WARN result does not fail the run or
            # block production_model, which sees the pending request itself and leaves production as it is.
            metadata.update(pending_metadata(outcome.request))
            context.log.info(outcome.message)
            return dg.AssetCheckResult(
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"Pending: {outcome.message}",
                metadata=metadata,
            )
        if not outcome.passed:
            context.log.warning(outcome.message)
        return dg.AssetCheckResult(passed=outcome.passed, description=outcome.message, metadata=metadata)

    return [meets_policy, human_approval]


def pending_metadata(request: dict[str, Any]) -> dict[str, dg.MetadataValue | str]:
    """What a person looking at a pending human_approval check needs: which request, by when, and how to decide."""
    from runtime_ops.approvals.gate import decide_command

    out: dict[str, dg.MetadataValue | str] = {
        # Approvers also got signed links (Slack, or the log without Slack): those decide in one click.
        "decide": decide_command(request["id"]),
    }
    if request.get("expire_at") is not None:
        out["expires_at"] = dg.MetadataValue.timestamp(request["expire_at"])
    return out


def request_policy(spec: PipelineSpec) -> "RequestPolicy":
    """The approval policy new requests of this pipeline open with (a request keeps it once open); the pipeline's
    load checked that it can be satisfied."""
    from runtime_ops.pipeline.resolve import approval_policy

    return approval_policy(spec.approvals)
