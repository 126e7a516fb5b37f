"""`GET /api/approvals`: approval requests as JSON, newest first (the fields an operator may see, and each one's
evidence without the query-log counts); `GET /api/approvals/{id}`: one request with its whole evidence (offline,
online, the ramp's stage results, a rollback's alert), pending or decided; an API key with the `read` scope.
`POST /api/approvals/{id}/approve|reject`: an operator's decision; an API key with the `decide` scope mapped to an
approver id (`runtime-ops keys create NAME --scope decide --approver ID`), who the decision is recorded as."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from starlette.concurrency import run_in_threadpool

from runtime_ops.api.auth import DecideKey, require_scope
from runtime_ops.api.deps import AnnouncerDep, OpsDep, StoreDep
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
VOTE_FIELDS = ("actor", "vote", "channel", "created_at")


@router.get("/api/approvals", dependencies=[Depends(require_scope("read"))])
def list_approvals(
    store: StoreDep, announcer: AnnouncerDep, status: str | None = None, limit: int = 100, pipeline: str | None = None
) -> JSONResponse:
    if status is not None and status not in STATUSES:
        return JSONResponse({"error": f"unknown status {status!r}; use one of {sorted(STATUSES)}"}, 400)
    scoped = store.scoped(pipeline) if pipeline else store  # every pipeline's requests unless one is named
    rows = scoped.requests.list_requests(status=status, limit=max(1, min(limit, 500)))
    shown = [{**_public(r), "evidence": announcer.evidence(r, live=False)} for r in rows]
    return JSONResponse(jsonable_encoder(shown))


@router.get("/api/approvals/{request_id}", dependencies=[Depends(require_scope("read"))])
def get_approval(request_id: str, store: StoreDep, announcer: AnnouncerDep) -> JSONResponse:
    request = store.requests.get_request(request_id[:64])
    if request is None:
        return JSONResponse({"error": f"no approval request {request_id[:64]!r}; list them at /api/approvals"}, 404)
    votes = [{k: v.get(k) for k in VOTE_FIELDS} for v in store.votes.for_request(request["id"])]
    return JSONResponse(jsonable_encoder({**_public(request), "evidence": announcer.evidence(request), "votes": votes}))


def _public(request: dict[str, Any]) -> dict[str, Any]:
    return {k: request.get(k) for k in PUBLIC_FIELDS}


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
