"""A candidate's approval request, from the gate's verdict to a promotion: opening it (once per candidate digest),
what its state means (`outcome_for`), and re-verifying it before a promotion (`verify_promotion`, `PromotionRefused`).

What the checks, the promotion and the CLI all ask; the rule itself is `policies/gate_rule.py`. No Dagster here, so
the same rules hold whether a check, a run that skipped the check, or a person asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime_ops.approvals.ramp import ramp_refusal
from runtime_ops.command_hint import cli
from runtime_ops.observability import tracing
from runtime_ops.pipeline.resolve import approval_policy
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore
from runtime_ops.store.approvals.requests import Requests
from runtime_ops.store.registry.evaluations import Evaluations
from runtime_ops.store.serving.rollouts import Rollouts
from runtime_ops.tags import CANARY_ALIAS


class PromotionRefused(RuntimeError):
    """Promotion is not allowed for this candidate; the message says why and what to do. `status` is the
    approval request's status when a request decided it (`pending`: a person has not decided yet)."""

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class GateOutcome:
    passed: bool
    status: str  # approved | pending | rejected | superseded | expired | below_policy | no_report
    message: str
    report: dict[str, Any] | None = None
    request: dict[str, Any] | None = None


def decide_command(request_id: str) -> str:
    return f"{cli()} approvals approve {request_id}  (or: {cli()} approvals reject {request_id} --reason ...)"


CANARY_COMPENSATION = "remove_canary"


def evaluate_gate(
    store: StateStore,
    *,
    requested_by: str,
    run_id: str | None = None,
    policy: RequestPolicy | None = None,
    online: OnlinePolicy | None = None,
    now: datetime | None = None,
) -> GateOutcome:
    """Judge the latest evaluation report; open (once per candidate digest) the approval request it needs.

    While a human decides, the candidate serves as the `canary` alias; if the request ends without approval
    (rejected or expired) the registered compensation removes that alias again. When the pipeline requires online
    evidence (`online.required`) a candidate the offline verdict auto-approves still opens a pending request, unless
    it is a first model: the approvals sensor approves it once its rollout wins on live traffic
    (`approvals/online_gate.py`), and a person may decide before that.
    """
    report = store.evaluations.latest_eval_report()
    if report is None:
        return GateOutcome(False, "no_report", "no evaluation report yet: materialize evaluation_report first")
    verdict = report["verdict"]
    version = report["candidate_version"]
    if not verdict["meets_policy"]:
        return GateOutcome(
            False,
            "below_policy",
            f"candidate v{version} does not meet the policy: {verdict['reason']}",
            report,
        )
    auto = bool(verdict["auto_approve"])
    if auto and online is not None and online.required and report.get("production_version") is not None:
        auto = False
    # The request span's traceparent is stored on the request, so each decision (in the ops API or the CLI,
    # minutes or days later) and the promotion run link back to it.
    with tracing.approval_request_span(
        **{"approval.kind": "policy" if auto else "human", "approval.candidate_version": version}
    ) as span:
        request, created = store.requests.open_request(
            candidate_version=version,
            candidate_digest=report["candidate_digest"],
            eval_report_id=report["id"],
            requested_by=requested_by,
            kind="policy" if auto else "human",
            decided_by="policy" if auto else None,
            decision_reason=verdict["reason"] if auto else None,
            run_id=run_id,
            policy=policy,
            compensation=CANARY_COMPENSATION,
            now=now,
            trace_context=tracing.traceparent(span),
        )
        span.set_attribute("approval.id", request["id"])
        span.set_attribute("approval.created", created)
    if created and not auto:
        store.registry.set_alias(CANARY_ALIAS, version, actor="gate", approval_id=request["id"], run_id=run_id)
    return outcome_for(request, report)


def outcome_for(request: dict[str, Any], report: dict[str, Any] | None) -> GateOutcome:
    rid = request["id"]
    version = request["candidate_version"]
    status = request["status"]
    if status == "approved":
        how = "auto-approved by policy" if request["kind"] == "policy" else f"approved by {request['decided_by']}"
        reason = f": {request['decision_reason']}" if request.get("decision_reason") else ""
        return GateOutcome(True, status, f"candidate v{version} {how} ({rid}){reason}", report, request)
    if status == "pending":
        # Pending although the offline verdict auto-approves: the pipeline requires online evidence too.
        online = (
            " (it clears the offline gate; gate.online.required: live traffic may approve it)"
            if (report is not None and (report.get("verdict") or {}).get("auto_approve"))
            else ""
        )
        return GateOutcome(
            False,
            status,
            f"candidate v{version} waits for a human decision{online}: approval request {rid}. "
            f"Decide with: {decide_command(rid)}",
            report,
            request,
        )
    reason = f": {request['decision_reason']}" if request.get("decision_reason") else ""
    by = f" by {request['decided_by']}" if request.get("decided_by") else ""
    return GateOutcome(False, status, f"candidate v{version} was {status}{by} ({rid}){reason}", report, request)


def verify_promotion(
    evaluations: Evaluations, requests: Requests, rollouts: Rollouts, *, approval_id: str | None = None
) -> tuple[int, dict[str, Any]]:
    """Re-verify, independently of any check, that the current candidate may be promoted.

    Returns (candidate version, approved request). The decision must be for this exact candidate digest
    (model bytes + evaluation report), so an approval shown for one candidate never promotes another; and an
    approval whose ramp rolled back (the candidate lost online) never promotes at all.
    """
    report = evaluations.latest_eval_report()
    if report is None:
        raise PromotionRefused("refusing to promote: no evaluation report exists; materialize evaluation_report")
    digest = report["candidate_digest"]
    version = report["candidate_version"]
    if approval_id is not None:
        request = requests.get_request(approval_id)
        if request is None:
            raise PromotionRefused(f"refusing to promote: approval request {approval_id!r} does not exist")
        if request["candidate_digest"] != digest:
            raise PromotionRefused(
                f"refusing to promote: approval {approval_id} was given for candidate v{request['candidate_version']} "
                f"(digest {request['candidate_digest'][:12]}…), but the current candidate is v{version} "
                f"(digest {digest[:12]}…); the decision does not carry over to a different candidate"
            )
    else:
        request = requests.request_for_digest(digest)
    if request is None:
        raise PromotionRefused(
            f"refusing to promote candidate v{version}: no approval recorded for its digest {digest[:12]}…. "
            "Run the human_approval check (materialize evaluation_report with its checks) to open a request"
        )
    if not report["verdict"]["meets_policy"]:
        raise PromotionRefused(f"refusing to promote candidate v{version}: {report['verdict']['reason']}")
    outcome = outcome_for(request, report)
    if not outcome.passed:
        raise PromotionRefused(f"refusing to promote: {outcome.message}", outcome.status)
    refusal = ramp_refusal(rollouts.stages(request["id"]))
    if refusal is not None:
        raise PromotionRefused(f"refusing to promote candidate v{version} ({request['id']}): {refusal}", "rolled_back")
    return version, request


def request_policy(spec: PipelineSpec) -> RequestPolicy:
    """The approval policy new requests of this pipeline open with (a request keeps it once open); the pipeline's
    load checked that it can be satisfied."""
    return approval_policy(spec.approvals)
