"""What an asset gate's request (`ApprovalGate`) shows in Slack and on the approval page: the gated materialization,
its evidence, the auto-approve rule's reason, and what a decision sets in motion. A model promotion's view is
`Announcer.view` (`approvals/announce.py`), which hands a request with a `target` here."""

from __future__ import annotations

from typing import Any, Protocol

from runtime_ops.approvals.slack.blocks import RequestView, request_fields
from runtime_ops.pipeline.gate_spec import split_label
from runtime_ops.store import StateStore


class Viewer(Protocol):
    """What a view needs of the announcer (`approvals/announce.py:Announcer`): the store and the Dagster links."""

    store: StateStore
    sensor_interval_s: int

    def run_url(self, run_id: str | None) -> str | None: ...
    def asset_url(self, *path: str) -> str: ...
    def promotion_runs_url(self, request: dict[str, Any]) -> str: ...


def asset_next_step(request: dict[str, Any], *, approvals: int, interval_s: int) -> str:
    """What the votes on an asset gate's request set in motion, and when; "" before the first vote."""
    status = request["status"]
    if status == "approved":
        launched = request.get("promotion_run_id")
        if launched:
            return f"Run {launched} was launched for this decision (the gate's on_approval)."
        return f"The gate's approval sensor launches its on_approval run within ~{interval_s} s."
    if status in ("rejected", "expired"):
        return "Nothing that waits on this materialization runs: the assets after it refuse it."
    required = int(request.get("required_approvals") or 1)
    if status == "pending" and approvals:
        left = required - approvals
        return f"{left} more approval{'s' if left != 1 else ''} needed; nothing runs until then."
    return ""


def asset_view(announcer: Viewer, request: dict[str, Any]) -> RequestView:
    votes = announcer.store.votes.for_request(request["id"])
    approvals = [v["actor"] for v in votes if v["vote"] == "approve"]
    path, _ = split_label(request["target"])
    return RequestView(
        **request_fields(request, approvals),
        candidate_version="-",
        production_version=None,
        verdict=request.get("decision_reason") or "" if request.get("kind") == "policy" else "",
        dagster_run_url=announcer.run_url(request.get("run_id")),
        candidate_url=announcer.asset_url(*path),
        promotion_runs_url=announcer.promotion_runs_url(request),
        next_step=asset_next_step(request, approvals=len(approvals), interval_s=announcer.sensor_interval_s),
        target=request["target"],
        evidence=[(str(name), str(value)) for name, value in (request.get("evidence") or {}).items()],
    )
