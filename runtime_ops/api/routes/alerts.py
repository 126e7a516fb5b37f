"""The Alertmanager inbox: `POST /alerts/alertmanager` records alerts, `GET /api/alerts` lists them.

The alert sensor reads the inbox and turns alerts into runs (`runtime_ops.alerts`); this route only records.
"""

from __future__ import annotations

import hmac
import logging

from fastapi import APIRouter, Depends, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from runtime_ops.alerts.webhook import MalformedPayload, parse_payload
from runtime_ops.api.auth import require_scope
from runtime_ops.api.deps import ClockDep, RefusalsDep, SettingsDep, StoreDep

router = APIRouter(tags=["alerts"])
log = logging.getLogger("runtime_ops.api")

# Alertmanager batches alerts (max_alerts, default unlimited); a body past this is refused, not half-read.
ALERT_FIELDS = (
    "pipeline",
    "id",
    "fingerprint",
    "alertname",
    "status",
    "starts_at",
    "ends_at",
    "labels",
    "annotations",
    "generator_url",
    "receiver",
    "received_at",
    "updated_at",
    "resolved_at",
    "rule",
    "action",
    "action_status",
    "action_detail",
    "action_params",
    "run_key",
    "run_id",
    "approval_id",
    "handled_at",
)


@router.post("/alerts/alertmanager")
async def alertmanager_webhook(
    request: Request, settings: SettingsDep, store: StoreDep, now: ClockDep, refusals: RefusalsDep
) -> JSONResponse:
    """Alertmanager's webhook (version 4). 4xx for what a retry cannot fix (Alertmanager does not retry
    them); 503 only when nothing was recorded (it retries 5xx, and a redelivery is a no-op)."""
    token = settings.alert_token.get_secret_value() if settings.alert_token else None
    if token is None and not settings.alert_open:
        log.warning("alert webhook refused: no RUNTIME_OPS_ALERT_TOKEN configured")
        return JSONResponse(
            {
                "error": "the alert webhook is closed: set RUNTIME_OPS_ALERT_TOKEN (and the same bearer token in "
                "Alertmanager's webhook config), or RUNTIME_OPS_ALERT_OPEN=true for local use only"
            },
            403,
        )
    if token is not None:
        supplied = request.headers.get("authorization", "")
        if not hmac.compare_digest(supplied.encode(), f"Bearer {token}".encode()):
            client = request.client.host if request.client else None
            detail = {"reason": "missing or wrong bearer token"}
            retry = await run_in_threadpool(
                refusals.refused, channel="alerts", outcome="unauthenticated", client=client, detail=detail
            )
            if retry is not None:
                return JSONResponse({"error": "too many failed authentications"}, 429, {"Retry-After": str(retry)})
            return JSONResponse({"error": "missing or wrong bearer token (RUNTIME_OPS_ALERT_TOKEN)"}, 401)
    body = await request.body()  # bounded by the app's BodyLimit (runtime_ops.api.guards)
    try:
        payload = parse_payload(body)
    except MalformedPayload as exc:
        return JSONResponse({"error": f"malformed Alertmanager webhook: {exc}"}, 400)
    try:
        counts = await run_in_threadpool(
            store.alerts.record_alerts,
            [a.row() for a in payload.alerts],
            receiver=payload.receiver[:256],
            group_key=payload.group_key,
            now=now(),
        )
    except Exception as exc:  # one transaction: nothing was recorded, so Alertmanager's retry is safe
        log.exception("alert webhook not recorded")
        return JSONResponse({"error": f"alerts not recorded ({type(exc).__name__}); retry later"}, 503)
    return JSONResponse({"status": "recorded", "alerts": len(payload.alerts), **counts})


@router.get("/api/alerts", dependencies=[Depends(require_scope("read"))])
def list_alerts(
    store: StoreDep, status: str | None = None, limit: int = 100, pipeline: str | None = None
) -> JSONResponse:
    if status is not None and status not in ("firing", "resolved"):
        return JSONResponse({"error": f"unknown status {status!r}; use firing or resolved"}, 400)
    scoped = store.scoped(pipeline) if pipeline else store  # the alerts of every pipeline unless one is named
    rows = scoped.alerts.list_alerts(status=status, limit=max(1, min(limit, 500)))
    return JSONResponse(jsonable_encoder([{k: r.get(k) for k in ALERT_FIELDS} for r in rows]))
