"""`GET /api/approvals`: approval requests as JSON, newest first (the fields an operator may see); an API key with
the `read` scope. `POST /api/approvals/{id}/approve|reject`: an operator's decision; an API key with the `decide`
scope mapped to an approver id (`runtime-ops keys create NAME --scope decide --approver ID`), who the decision is
recorded as."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, BackgroundTasks, Depends
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from starlette.concurrency import run_in_threadpool

from runtime_ops.api.auth import DecideKey, require_scope
from runtime_ops.api.deps import OpsDep, StoreDep
from runtime_ops.decisions.decide import decide
from runtime_ops.storable_text import unstorable

router = APIRouter(tags=["approvals"])

STATUSES = frozenset({"pending", "approved", "rejected", "superseded", "expired"})
# Not the Slack message ids, the audit chain head or the trace context: internals, not the request's story.
PUBLIC_FIELDS = (
    "pipeline",
    "id",
    "status",
    "kind",
    "candidate_version",
    "candidate_digest",
    # An asset gate's request: the gated materialization's label and its evidence (None for a model promotion).
    "target",
    "evidence",
    "requested_by",
    "created_at",
    "decided_at",
    "decided_by",
    "decision_reason",
    "required_approvals",
    "approvers",
    "escalation_approvers",
    "escalate_at",
    "expire_at",
    "escalated_at",
    "superseded_by",
    "promotion_run_id",
)


@router.get("/api/approvals", dependencies=[Depends(require_scope("read"))])
def list_approvals(
    store: StoreDep, status: str | None = None, limit: int = 100, pipeline: str | None = None
) -> JSONResponse:
    if status is not None and status not in STATUSES:
        return JSONResponse({"error": f"unknown status {status!r}; use one of {sorted(STATUSES)}"}, 400)
    scoped = store.scoped(pipeline) if pipeline else store  # every pipeline's requests unless one is named
    rows = scoped.requests.list_requests(status=status, limit=max(1, min(limit, 500)))
    return JSONResponse(jsonable_encoder([{k: r.get(k) for k in PUBLIC_FIELDS} for r in rows]))


class DecisionBody(BaseModel):
    reason: str | None = Field(None, max_length=2000, description="why (required to reject)")

    @field_validator("reason")
    @classmethod
    def _storable(cls, v: str | None) -> str | None:
        problem = unstorable(v or "")
        if problem:  # a 422 naming the field, not a failed transaction (500) in the state store
            raise ValueError(f"contains {problem}, which cannot be stored")
        return v


def _status(outcome: str) -> int:
    if outcome in ("accepted", "recorded"):
        return 200
    if outcome == "unknown_request":
        return 404
    if outcome in ("already_decided", "expired", "duplicate_vote"):
        return 409
    return 403  # unauthorised, self_approval


@router.post("/api/approvals/{request_id}/{action}")
async def decide_request(
    request_id: str,
    action: Literal["approve", "reject"],
    key: DecideKey,
    ops: OpsDep,
    background: BackgroundTasks,
    body: DecisionBody | None = None,
) -> JSONResponse:
    """Approve or reject as the approver the key is mapped to; the outcome is what the request's policy says
    (four eyes, M-of-N, tiers, expiry), exactly as for a Slack click or a signed link."""
    reason = body.reason.strip() if body and body.reason else None
    if key.approver is None:
        message = f"API key {key.key_id} is not mapped to an approver id, so it cannot decide"
        detail = {"action": action, "message": message, "api_key": key.key_id}
        await run_in_threadpool(
            ops.store.audit_log.append,
            event="attempt",
            request_id=request_id[:64],
            actor=key.label,
            channel="api",
            outcome="unauthorised",
            detail=detail,
            now=ops.now(),
        )
        return JSONResponse({"error": f"{message}: create one with --approver"}, 403)
    if action == "reject" and not reason:
        return JSONResponse({"error": 'a rejection needs a reason: send {"reason": "..."}'}, 400)
    outcome = await run_in_threadpool(
        decide, ops.store, request_id, actor=key.approver, vote=action, channel="api", reason=reason, now=ops.now()
    )
    if outcome.counted:
        background.add_task(ops.announcer.after_decision, request_id)
    request = outcome.request or {}
    return JSONResponse(
        {
            "outcome": outcome.outcome,
            "message": outcome.message,
            "actor": key.approver,
            "status": request.get("status"),
        },
        _status(outcome.outcome),
    )
