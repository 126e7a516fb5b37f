"""What an approval request's view says besides its evidence (pure): the evaluation set its numbers come from, the
next step its decision sets in motion, and the short state its Slack message is kept in step with.
"""

from __future__ import annotations

import hashlib
from typing import Any

from runtime_ops.approvals.requests import CANARY_COMPENSATION
from runtime_ops.approvals.rollback_facts import rollback_facts
from runtime_ops.store.operations.alerts import ALERT_SENSOR_LAUNCHES
from runtime_ops.tags import CANARY_ALIAS


def evaluated_on(report: dict[str, Any]) -> tuple[str, int | None]:
    """The evaluation set a report's numbers were scored on: its version (first 12 hex chars; "" for reports
    from before sets were versioned) and how many of its questions were scored (None when unknown)."""
    version = str((report.get("verdict") or {}).get("question_set") or "")[:12]
    if report.get("questions") is not None:
        return version, len(report["questions"])
    # A stored report row keeps no question ids (only their digest); scoring records their count as a metric.
    count = (report.get("candidate_metrics") or {}).get("questions")
    if count is None:
        count = ((report.get("verdict") or {}).get("interval") or {}).get("n")
    return version, int(count) if count is not None else None


def next_step(
    request: dict[str, Any],
    *,
    production_version: int | None,
    approvals: int,
    interval_s: int,
    ramp: str = "",
    lifecycle: str | None = None,
) -> str:
    """What the votes recorded on `request` set in motion, and when; "" before the first vote. `ramp`: what its
    ramp after approval says (`approvals/ramp.py`), which is the next step of an approved request that has one.
    `lifecycle`: where its candidate is (`lifecycle/machine.describe`), said first once the request is decided."""
    text = _next_step(request, production_version=production_version, approvals=approvals, interval_s=interval_s,
                      ramp=ramp)  # fmt: skip
    if lifecycle is None or request["status"] == "pending":
        return text
    return f"Candidate: {lifecycle}. {text}".strip()


def _next_step(
    request: dict[str, Any], *, production_version: int | None, approvals: int, interval_s: int, ramp: str
) -> str:
    status = request["status"]
    facts = rollback_facts(request)
    if facts is not None and status != "pending":
        return facts.next_step(status)
    if status == "approved" and ramp:
        return ramp
    soon = f"within ~{interval_s} s"
    target = f"v{request['candidate_version']}"
    launched = request.get("promotion_run_id")
    # A rollback's request is decided here, but its run is the alert sensor's to launch (store.alerts).
    rollback = launched == ALERT_SENSOR_LAUNCHES
    if status == "approved":
        then = f"production moves to {target} when that run succeeds."
        if rollback:
            return f"The alert sensor launches the rollback run on its next tick; {then}"
        if launched:
            return f"Run {launched} was launched for this decision; {then}"
        return f"The approvals sensor launches the promotion run {soon}; {then}"
    if status in ("rejected", "expired"):
        if rollback:
            return "Production stays as it is; no rollback run starts."
        text = (
            f"Production stays on v{production_version} and no promotion run starts."
            if production_version is not None
            else "No promotion run starts (there is no production model yet)."
        )
        if request.get("compensation") == CANARY_COMPENSATION:
            text += (
                f" The {CANARY_ALIAS} alias was removed."
                if request.get("compensated_at")
                else f" The approvals sensor removes the {CANARY_ALIAS} alias {soon}."
            )
        return text
    required = int(request.get("required_approvals") or 1)
    if status == "pending" and approvals:
        left = required - approvals
        return f"{left} more approval{'s' if left != 1 else ''} needed; nothing is promoted until then."
    return ""


SLACK_STATUS_CHARS = 16  # the `slack_status` column


def view_state(
    request: dict[str, Any],
    approvals: int,
    stages: list[dict[str, Any]] | None = None,
    verdict: str | None = None,
    lifecycle: str | None = None,
) -> str:
    """What a message shows, in the 16 characters `slack_status` keeps: a message whose state differs is updated,
    once. A ramp adds its last stage and that stage's status initial (`2a`: stage 2 active; `0r`: rolled back at
    stage 0); the online verdict its initial (`b`etter, `w`orse, `n`o difference yet, not `e`nough queries). A state
    too long for the column is kept as its digest: equal states still compare equal."""
    ramp = f"|{stages[-1]['stage']}{stages[-1]['status'][0]}" if stages else ""
    online = f"|{_VERDICT_INITIAL.get(verdict, '?')}" if verdict else ""
    moved = f"|{lifecycle}" if lifecycle else ""  # the candidate's lifecycle moved: promoting, promoted, halted...
    state = f"{request['status']}|{approvals}|{int(bool(request.get('escalated_at')))}{ramp}{online}{moved}"
    if len(state) <= SLACK_STATUS_CHARS:
        return state
    return "#" + hashlib.sha256(state.encode()).hexdigest()[: SLACK_STATUS_CHARS - 1]


_VERDICT_INITIAL = {"better": "b", "worse": "w", "no difference yet": "n", "not enough queries": "e"}
