"""The approval gate, for anything a person approves: one request per digest of what is approved, superseding the
scope's pending request for the same target, and the words every channel uses for its state.

The retrieval pipeline's promotion (`approvals/requests.py`: the evaluation report is the evidence, the metric
interval the auto-approve rule) and any asset's `ApprovalGate` (`approvals/asset_gate.py`: the materialization's
metadata is the evidence, `auto_approve` the rule) both open their requests here. No Dagster here, so the same
rules hold whether a check, a run that skipped the check, or a person asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runtime_ops.approvals.rollback_facts import rollback_facts
from runtime_ops.command_hint import cli
from runtime_ops.observability import tracing
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.store import StateStore

# Who opened a request when no authenticated person did (a schedule, a sensor, a run launched in the Dagster UI).
SYSTEM = "system"


class PromotionRefused(RuntimeError):
    """What was approved may not go ahead; the message says why and what to do. `status` is the approval
    request's status when a request decided it (`pending`: a person has not decided yet)."""

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class GateSubject:
    """What a request asks about. `target` labels a gated asset ("scoring/ticket_labels", one partition:
    "scoring/ticket_labels[2026-12-01]"); None is a model promotion, named by `candidate_version` instead.
    `digest` is of exactly what is approved (a decision never carries over to other data); `auto` is the
    auto-approve rule's verdict (approve?, reason), None when the gate has no rule."""

    target: str | None
    digest: str
    evidence: dict[str, Any] = field(default_factory=dict)
    auto: tuple[bool, str] | None = None
    candidate_version: int | None = None
    eval_report_id: int | None = None


@dataclass(frozen=True)
class GateOutcome:
    passed: bool
    status: str  # approved | pending | rejected | superseded | expired | below_policy | no_report | ...
    message: str
    report: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    created: bool = False  # this call opened the request


def decide_command(request_id: str) -> str:
    return f"{cli()} approvals approve {request_id}  (or: {cli()} approvals reject {request_id} --reason ...)"


def subject_label(request: dict[str, Any]) -> str:
    """How every channel names what a request approves: "candidate v3" for a model promotion,
    "scoring/ticket_labels (digest ab12cd34ef56…)" for a gated asset, "rollback v4 -> v2" for an alert's rollback."""
    if request.get("target") is None:
        facts = rollback_facts(request)
        return facts.label() if facts is not None else f"candidate v{request['candidate_version']}"
    return f"{request['target']} (digest {str(request['candidate_digest'])[:12]}…)"


def open_gate(
    store: StateStore,
    subject: GateSubject,
    *,
    requested_by: str,
    run_id: str | None = None,
    policy: RequestPolicy | None = None,
    compensation: str | None = None,
    now: datetime | None = None,
) -> GateOutcome:
    """Open (once per digest, in the store's scope) the request `subject` needs, and say where it stands.

    A subject the rule approves opens already approved (`kind` policy); otherwise a person decides. Opening a
    request supersedes the scope's pending requests for the same target and another digest."""
    auto = bool(subject.auto and subject.auto[0])
    what = (
        {"approval.candidate_version": subject.candidate_version}
        if subject.target is None
        else {"approval.target": subject.target}
    )
    # The request span's traceparent is stored on the request, so each decision (in the ops API or the CLI,
    # minutes or days later) and the run it launches link back to it.
    with tracing.approval_request_span(**{"approval.kind": "policy" if auto else "human", **what}) as span:
        request, created = store.requests.open_request(
            candidate_version=subject.candidate_version,
            candidate_digest=subject.digest,
            eval_report_id=subject.eval_report_id,
            target=subject.target,
            evidence=subject.evidence or None,
            requested_by=requested_by,
            kind="policy" if auto else "human",
            decided_by="policy" if auto else None,
            decision_reason=subject.auto[1] if (auto and subject.auto) else None,
            run_id=run_id,
            policy=policy,
            compensation=compensation,
            now=now,
            trace_context=tracing.traceparent(span),
        )
        span.set_attribute("approval.id", request["id"])
        span.set_attribute("approval.created", created)
    outcome = outcome_for(request)
    return GateOutcome(outcome.passed, outcome.status, outcome.message, None, request, created)


def outcome_for(
    request: dict[str, Any], report: dict[str, Any] | None = None, *, pending_note: str = ""
) -> GateOutcome:
    """Where `request` stands, in the words the check, the promotion and the CLI show. `pending_note` adds why a
    request waits although a rule cleared it (the retrieval gate's online half)."""
    rid = request["id"]
    label = subject_label(request)
    status = request["status"]
    if status == "approved":
        how = "auto-approved by policy" if request["kind"] == "policy" else f"approved by {request['decided_by']}"
        reason = f": {request['decision_reason']}" if request.get("decision_reason") else ""
        return GateOutcome(True, status, f"{label} {how} ({rid}){reason}", report, request)
    if status == "pending":
        return GateOutcome(
            False,
            status,
            f"{label} waits for a human decision{pending_note}: approval request {rid}. "
            f"Decide with: {decide_command(rid)}",
            report,
            request,
        )
    reason = f": {request['decision_reason']}" if request.get("decision_reason") else ""
    by = f" by {request['decided_by']}" if request.get("decided_by") else ""
    return GateOutcome(False, status, f"{label} was {status}{by} ({rid}){reason}", report, request)
