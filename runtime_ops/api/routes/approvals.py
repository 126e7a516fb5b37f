"""`GET /api/approvals`: approval requests as JSON, newest first (the fields an operator may see); an API key with
the `read` scope."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from runtime_ops.api.auth import require_scope
from runtime_ops.api.deps import StoreDep

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
