"""`POST /api/feedback`: an application says which shown item helped (or did not) on a request it made.

    curl -X POST "$URL/api/feedback" -H "Authorization: Bearer $KEY" -H 'content-type: application/json' \\
         -d '{"request_id": "q_01JEXAMPLE...", "chunk_id": 42, "signal": "click"}'

Feedback is evidence the online gate decides on, so it is accepted only from the API key that made the request, and,
when the request named a `session`, only with that same `session` (`online/feedback_binding.py`); another key's or
session's feedback is refused (403) and recorded as the API records refusals (`api/refusals.py`). The request must
be one of this API's `/api/search` or `/api/answer` requests, still within retention and
RUNTIME_OPS_FEEDBACK_WINDOW, and the item one it showed. One piece of feedback per (request, item, signal): sending
it again is a 200 with `"duplicate": true` that writes nothing. Each key and session may send feedback at most as
fast as RUNTIME_OPS_KEY_FEEDBACK_PER_S / RUNTIME_OPS_SESSION_FEEDBACK_PER_S allow. Every refusal writes nothing:

| status | when |
|---|---|
| 403 | the request was made by another key, or in another session (or in one, and the feedback names none) |
| 404 | no such request (never issued here, or its record was dropped) |
| 409 + Retry-After | the request is younger than the query log's flush: not written yet, retry shortly |
| 410 | the request is older than the feedback window or the pipeline's `queries.retain` |
| 413 | a body over 64 KiB (refused before it is read: `runtime_ops.api.guards`) |
| 422 | a malformed body, an unknown signal, or an item the request did not show |
| 429 + Retry-After | over this key's or session's feedback limit (`api/request_limits.py`) |
| 401 / 403 | no key / a key without the `search` scope |
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from runtime_ops.api.auth import SearchKey
from runtime_ops.api.deps import OpsContext, get_ops
from runtime_ops.api.request_limits import RequestLimits
from runtime_ops.api.routes.search import (
    MAX_SESSION_CHARS,
    QueryLogging,
    SearchMetrics,
    client_of,
    get_limits,
    get_metrics,
    get_query_logging,
    get_searchers,
)
from runtime_ops.api.searchers import Searchers
from runtime_ops.online.feedback_binding import binding_refusal
from runtime_ops.online.request_ids import issued_at
from runtime_ops.store.serving.query_log import LoggedRequest

router = APIRouter(tags=["search"])
log = logging.getLogger("runtime_ops.api.feedback")

# A request id whose time lies this far ahead of the server's clock was not issued by it (clocks of replicas differ
# by less).
MAX_CLOCK_SKEW = timedelta(minutes=1)
_EXAMPLE = {"request_id": "q_01JEH6Q4Z0R8W5N2K7M9P3T6XA", "chunk_id": 42, "signal": "helpful", "value": 1.0}


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})
    request_id: str = Field(
        min_length=1, max_length=64, description="The `request_id` of the /api/search or /api/answer response."
    )
    chunk_id: int = Field(ge=0, description="The `chunk_id` of a result (or of a source) that request showed.")
    signal: Literal["click", "helpful", "not_helpful"] = Field(description="What the user did or said.")
    value: float | None = Field(
        default=None,
        ge=-1e6,
        le=1e6,
        allow_inf_nan=False,
        description="An optional graded value (a rating, a dwell time), stored as sent.",
    )
    session: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SESSION_CHARS,
        description="The `session` the search named, when it named one: feedback is accepted only from it.",
    )


def _found(
    ops: OpsContext, query_log: QueryLogging, retain: timedelta, request_id: str, now: datetime
) -> LoggedRequest:
    """The logged request, or the 4xx that says why there is none (no database write either way)."""
    try:
        issued = issued_at(request_id)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    window = ops.settings.feedback_window
    if issued > now + MAX_CLOCK_SKEW:
        raise HTTPException(404, f"no request {request_id}: it was not issued by this API")
    if window is not None and now - issued > window:
        raise HTTPException(
            410, f"request {request_id} is older than the feedback window ({window}, RUNTIME_OPS_FEEDBACK_WINDOW)"
        )
    try:
        logged = ops.store.query_log.get(request_id)
    except Exception as exc:
        raise HTTPException(503, f"cannot read the query log now ({type(exc).__name__}); retry later") from None
    if logged is None:
        flush = query_log.writer.flush_s
        if query_log.writer.pending(request_id) or now - issued < timedelta(seconds=2 * flush + 1):
            retry = max(1, math.ceil(flush))
            raise HTTPException(
                409,
                f"request {request_id} is not in the query log yet (written every {flush:g} s); retry in {retry} s",
                headers={"Retry-After": str(retry)},
            )
        if now - issued > retain:
            raise HTTPException(410, f"request {request_id} is older than the query log's retention ({retain})")
        raise HTTPException(404, f"no request {request_id} in the query log")
    return logged


@router.post(
    "/api/feedback",
    responses={
        201: {"description": "Recorded."},
        200: {"description": "The same feedback was recorded before: nothing written (`duplicate: true`)."},
        403: {"description": "The request was made by another API key or in another session."},
        404: {"description": "No such request."},
        409: {"description": "The request is not in the query log yet: retry after Retry-After seconds."},
        410: {"description": "The request is older than the feedback window or the query log's retention."},
        413: {"description": "Body over 64 KiB."},
        422: {"description": "Malformed body, or an item the request did not show."},
        429: {"description": "Over this key's or session's feedback limit: retry after Retry-After seconds."},
    },
    status_code=201,
)
def feedback(
    request: Request,
    body: FeedbackRequest,
    caller: SearchKey,
    ops: Annotated[OpsContext, Depends(get_ops)],
    searchers: Annotated[Searchers, Depends(get_searchers)],
    metrics: Annotated[SearchMetrics, Depends(get_metrics)],
    query_log: Annotated[QueryLogging, Depends(get_query_logging)],
    limits: Annotated[RequestLimits, Depends(get_limits)],
) -> Any:
    session = query_log.session_hash(body.session)
    client = client_of(request)
    limits.check("feedback", caller.key_id, session, client=client, path=request.url.path)
    now = ops.now()
    specs = searchers.specs()
    longest = max((s.queries.retain for s in specs.values()), default=timedelta(days=30))
    logged = _found(ops, query_log, longest, body.request_id, now)
    record = logged.record
    # Before anything else is said about the request (its items, its age): it may be someone else's.
    refusal = binding_refusal(
        request_id=body.request_id,
        made_by=record.get("key_id"),
        made_in=record["session_hash"],
        caller=caller.key_id,
        caller_session=session,
    )
    if refusal is not None:
        _refuse(ops, refusal, caller.key_id, client, request.url.path)
    spec = specs.get(record["pipeline"])
    if spec is not None and now - record["created_at"] > spec.queries.retain:
        retain = spec.queries.retain
        raise HTTPException(410, f"request {body.request_id} is older than {spec.name}'s queries.retain ({retain})")
    item = logged.item(body.chunk_id)
    if item is None:
        shown = ", ".join(str(i["chunk_id"]) for i in logged.items) or "none"
        raise HTTPException(
            422, f"chunk {body.chunk_id} was not shown for request {body.request_id} (shown chunk ids: {shown})"
        )
    try:
        new = ops.store.query_log.add_feedback(
            body.request_id, body.chunk_id, body.signal, body.value, caller.key_id, now
        )
    except Exception as exc:
        raise HTTPException(503, f"feedback not recorded ({type(exc).__name__}); retry later") from None
    if new:
        version = _version_of(record, item)
        metrics.feedback.labels(record["pipeline"], record["arm"], version, body.signal).inc()
        if body.signal == "click":
            metrics.click_rank.labels(record["pipeline"], version).observe(item["rank"])
    answer = {"request_id": body.request_id, "chunk_id": body.chunk_id, "signal": body.signal, "duplicate": not new}
    return JSONResponse(answer, status_code=201 if new else 200)


def _refuse(ops: OpsContext, reason: str, key_id: str, client: str | None, path: str) -> None:
    """Log and record (as the API records refusals: audited in aggregate) feedback on another's request; 403."""
    log.info("feedback refused: %s", reason, extra={"http_status": 403, "api_key": key_id, "path": path})
    detail = {"reason": reason, "path": path, "api_key": key_id, "http_status": 403}
    ops.refusals.refused(channel="api", outcome="forbidden", client=client, detail=detail)
    raise HTTPException(403, reason)


def _version_of(record: dict[str, Any], item: dict[str, Any]) -> str:
    """The model version that produced the item: its team's when interleaved, else the arm's."""
    arm = item["team"] or record["arm"]
    version = record["candidate_version"] if arm == "candidate" else record["production_version"]
    return str(version)
