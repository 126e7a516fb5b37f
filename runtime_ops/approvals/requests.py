"""The retrieval pipeline's use of the gate (`approvals/gate.py`): its evidence is the latest evaluation report, its
auto-approve rule the metric interval (`policies/gate_rule.py`); while a person decides, the candidate serves as the
`canary` alias (removed again by the compensation if the request ends without approval), and the online half of the
gate (`approvals/online_gate.py`) may hold an offline auto-approval for live traffic. `verify_promotion` re-checks a
decision before the promotion. No Dagster here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runtime_ops.approvals.gate import GateOutcome, GateSubject, PromotionRefused, open_gate, outcome_for
from runtime_ops.approvals.ramp import ramp_refusal
from runtime_ops.pipeline.resolve import approval_policy
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore
from runtime_ops.store.approvals.requests import Requests
from runtime_ops.store.registry.evaluations import Evaluations
from runtime_ops.store.serving.rollouts import Rollouts
from runtime_ops.tags import CANARY_ALIAS

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
    subject = GateSubject(
        target=None,
        digest=report["candidate_digest"],
        auto=(True, verdict["reason"]) if auto else None,
        candidate_version=version,
        eval_report_id=report["id"],
    )
    opened = open_gate(
        store,
        subject,
        requested_by=requested_by,
        run_id=run_id,
        policy=policy,
        compensation=CANARY_COMPENSATION,
        now=now,
    )
    request = opened.request or {}
    if opened.created and not auto:
        store.registry.set_alias(CANARY_ALIAS, version, actor="gate", approval_id=request["id"], run_id=run_id)
    return promotion_outcome(request, report)


def promotion_outcome(request: dict[str, Any], report: dict[str, Any] | None) -> GateOutcome:
    """`outcome_for` a model promotion's request: a pending request the offline verdict auto-approves waits for the
    online half of the gate (`gate.online.required`)."""
    offline_clear = report is not None and bool((report.get("verdict") or {}).get("auto_approve"))
    note = " (it clears the offline gate; gate.online.required: live traffic may approve it)" if offline_clear else ""
    return outcome_for(request, report, pending_note=note)


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
    outcome = promotion_outcome(request, report)
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
