"""The ops API: Slack interactions, signed approval pages, the approvals JSON API, the alert inbox, health.

`create_app()` builds it from the settings; tests pass their own settings and clock. Handlers are plain
`def`s: FastAPI runs them in its thread pool, and each does one short state-store transaction, so a Slack
click is acknowledged well within Slack's 3 seconds; Slack message updates run after the response.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import anyio
from fastapi import BackgroundTasks, FastAPI, Form, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CollectorRegistry
from sqlalchemy import select, text
from starlette.concurrency import run_in_threadpool

from runtime_ops import clock as default_clock
from runtime_ops.alerts.webhook import MalformedPayload, parse_payload
from runtime_ops.api.pages import evidence_page, outcome_page
from runtime_ops.api.webhooks import landing_router
from runtime_ops.approvals import links
from runtime_ops.approvals.announce import Announcer
from runtime_ops.approvals.slack.client import SlackNotifier, slack_client
from runtime_ops.approvals.slack.interactions import MalformedInteraction, parse_interaction
from runtime_ops.decisions.decide import decide
from runtime_ops.observability.logs import register_settings_secrets
from runtime_ops.settings import Settings, get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t

_REFUSAL_STATUS = {"tampered": 403, "expired": 410}
log = logging.getLogger("runtime_ops.api")
# Alertmanager batches alerts (max_alerts, default unlimited); a body past this is refused, not half-read.
_MAX_ALERT_BODY = 16 * 1024 * 1024
_ALERT_FIELDS = (
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
_THREADS = 10
_PUBLIC_FIELDS = (
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


class _SlackClock:
    """slack_sdk's SignatureVerifier asks its clock for epoch seconds."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now().timestamp()


def create_app(
    settings: Settings | None = None, clock: Callable[[], datetime] | None = None, dagster_instance: Any = None
) -> FastAPI:
    """`dagster_instance`: the instance /metrics reads runs and step events from; by default
    `DagsterInstance.get()` when DAGSTER_HOME is set (the one the daemon and run workers write)."""
    settings = settings or get_settings()
    now = clock or default_clock.now
    store = open_store(settings.resolved_database_url)
    link_secret = settings.resolved_link_secret()
    register_settings_secrets(settings, link_secret)
    notifier = None
    if settings.slack_bot_token and settings.slack_approval_channel:
        client = slack_client(settings.slack_bot_token.get_secret_value(), settings.slack_api_url)
        notifier = SlackNotifier(client, settings.slack_approval_channel)
    announcer = Announcer(store, link_secret, settings.public_url, settings.dagster_url, notifier)
    verifier = None
    if settings.slack_signing_secret:
        from slack_sdk.signature import SignatureVerifier

        verifier = SignatureVerifier(settings.slack_signing_secret.get_secret_value(), clock=_SlackClock(now))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Fewer threads than database connections: extra threads only queue on the pool and stretch the tail.
        anyio.to_thread.current_default_thread_limiter().total_tokens = _THREADS
        yield

    app = FastAPI(title="runtime_ops ops API", version="1", lifespan=lifespan, telemetry=_TELEMETRY)
    app.state.store = store
    app.include_router(
        landing_router(
            settings.webhook_secret.get_secret_value() if settings.webhook_secret else None,
            settings.resolved_landing,
            settings.aws_endpoint_url,
            settings.max_document_bytes,
        )
    )

    def sync_slack(request_id: str, response_url: str | None = None) -> None:
        request = store.get_request(request_id)
        if request is None:
            return
        if request.get("slack_ts") or response_url is None:
            announcer.sync_message(request)
        elif notifier is not None:  # a message we did not post (no ts recorded): answer through Slack's URL
            notifier.respond(response_url, announcer.view(request))

    # ------------------------------------------------------------------ Slack
    @app.post("/slack/interactions")
    async def slack_interactions(request: Request, background: BackgroundTasks) -> Response:
        if verifier is None:
            return JSONResponse({"error": "Slack interactivity is not configured: set SLACK_SIGNING_SECRET"}, 404)
        body = await request.body()  # the signature covers the raw bytes, so read them before any parsing
        problem = _signature_problem(verifier, body, request.headers)
        if problem:
            client = request.client.host if request.client else None
            await run_in_threadpool(
                store.audit,
                event="attempt",
                channel="slack",
                outcome="forged",
                detail={"reason": problem, "client": client},
                now=now(),
            )
            return JSONResponse({"error": f"invalid Slack signature: {problem}"}, 401)
        try:
            interaction = parse_interaction(body)
        except MalformedInteraction as exc:
            await run_in_threadpool(
                store.audit,
                event="attempt",
                channel="slack",
                outcome="malformed",
                detail={"reason": str(exc)},
                now=now(),
            )
            return JSONResponse({"error": f"malformed interaction: {exc}"}, 400)
        result = await run_in_threadpool(
            decide,
            store,
            interaction.value,
            actor=interaction.user_id,
            vote=interaction.vote,
            channel="slack",
            now=now(),
            dedupe_key=interaction.dedupe_key,
        )
        if notifier is not None and result.outcome != "duplicate_delivery":
            # After the acknowledgement: update the message everyone sees, or tell only the clicker why not.
            if result.counted:
                background.add_task(sync_slack, interaction.value, interaction.response_url)
            else:
                background.add_task(notifier.respond_ephemeral, interaction.response_url, result.message)
        return Response(status_code=200)

    # ------------------------------------------------------------------ signed links
    @app.get("/approvals/{token}", response_class=HTMLResponse)
    def approval_page(token: str) -> HTMLResponse:
        try:
            claims = links.read(link_secret, token, now())
        except links.LinkError as exc:
            return HTMLResponse(outcome_page("Link refused", str(exc), "refused"), _REFUSAL_STATUS[exc.kind])
        request = store.get_request(claims.request_id)
        if request is None:
            return HTMLResponse(outcome_page("Unknown request", f"No approval request {claims.request_id}."), 404)
        used = _link_use(store, claims.nonce)
        if used is not None:
            return HTMLResponse(
                outcome_page(
                    "Link already used",
                    f"This link was already used to {used['action']} at {used['used_at']:%Y-%m-%d %H:%M} UTC."
                    " Each link decides once.",
                    "refused",
                ),
                409,
            )
        if claims.digest != request["candidate_digest"]:
            return HTMLResponse(
                outcome_page(
                    "Candidate changed",
                    "This link was issued for a different candidate; the request it belongs to no longer applies.",
                    "refused",
                ),
                409,
            )
        if request["status"] != "pending":
            by = f" by {request['decided_by']}" if request.get("decided_by") else ""
            return HTMLResponse(outcome_page("Already decided", f"{request['id']} is {request['status']}{by}."), 409)
        report = store.get_eval_report(request["eval_report_id"]) or {}
        return HTMLResponse(evidence_page(request, report, claims.approver, store.votes(request["id"])))

    @app.post("/approvals/{token}", response_class=HTMLResponse)
    def approval_decide(
        token: str, background: BackgroundTasks, action: str = Form(...), reason: str | None = Form(None)
    ) -> HTMLResponse:
        if action not in ("approve", "reject"):
            return HTMLResponse(outcome_page("Bad request", f"unknown action {action!r}", "refused"), 400)
        try:
            claims = links.read(link_secret, token, now())
        except links.LinkError as exc:
            store.audit(
                event="attempt",
                channel="link",
                outcome=f"{exc.kind}_link",
                detail={"action": action, "message": str(exc)},
                now=now(),
            )
            return HTMLResponse(outcome_page("Link refused", str(exc), "refused"), _REFUSAL_STATUS[exc.kind])
        result = decide(
            store,
            claims.request_id,
            actor=claims.approver,
            vote="approve" if action == "approve" else "reject",
            channel="link",
            reason=reason or None,
            now=now(),
            link_nonce=claims.nonce,
            link_digest=claims.digest,
        )
        if result.counted:
            background.add_task(sync_slack, claims.request_id)
            title = "Approved" if action == "approve" else "Rejected"
            return HTMLResponse(outcome_page(title, result.message, "ok"))
        status = 409 if result.outcome in ("already_decided", "link_reused", "wrong_digest", "expired") else 403
        return HTMLResponse(outcome_page("Not recorded", result.message, "refused"), status)

    # ------------------------------------------------------------------ JSON API and health
    @app.get("/api/approvals")
    def list_approvals(status: str | None = None, limit: int = 100) -> JSONResponse:
        allowed = {"pending", "approved", "rejected", "superseded", "expired"}
        if status is not None and status not in allowed:
            return JSONResponse({"error": f"unknown status {status!r}; use one of {sorted(allowed)}"}, 400)
        rows = store.list_requests(status=status, limit=max(1, min(limit, 500)))
        return JSONResponse(jsonable_encoder([{k: r.get(k) for k in _PUBLIC_FIELDS} for r in rows]))

    # ------------------------------------------------------------------ Alertmanager inbox
    alert_token = settings.alert_token.get_secret_value() if settings.alert_token else None

    @app.post("/alerts/alertmanager")
    async def alertmanager_webhook(request: Request) -> JSONResponse:
        """Alertmanager's webhook (version 4). 4xx for what a retry cannot fix (Alertmanager does not retry
        them); 503 only when nothing was recorded (it retries 5xx, and a redelivery is a no-op)."""
        if alert_token is not None:
            supplied = request.headers.get("authorization", "")
            if not hmac.compare_digest(supplied.encode(), f"Bearer {alert_token}".encode()):
                return JSONResponse({"error": "missing or wrong bearer token (RUNTIME_OPS_ALERT_TOKEN)"}, 401)
        body = await request.body()
        if len(body) > _MAX_ALERT_BODY:
            return JSONResponse({"error": f"body larger than {_MAX_ALERT_BODY} bytes"}, 413)
        try:
            payload = parse_payload(body)
        except MalformedPayload as exc:
            return JSONResponse({"error": f"malformed Alertmanager webhook: {exc}"}, 400)
        try:
            counts = await run_in_threadpool(
                store.record_alerts,
                [a.row() for a in payload.alerts],
                receiver=payload.receiver[:256],
                group_key=payload.group_key,
                now=now(),
            )
        except Exception as exc:  # one transaction: nothing was recorded, so Alertmanager's retry is safe
            log.exception("alert webhook not recorded")
            return JSONResponse({"error": f"alerts not recorded ({type(exc).__name__}); retry later"}, 503)
        return JSONResponse({"status": "recorded", "alerts": len(payload.alerts), **counts})

    @app.get("/api/alerts")
    def list_alerts(status: str | None = None, limit: int = 100) -> JSONResponse:
        if status is not None and status not in ("firing", "resolved"):
            return JSONResponse({"error": f"unknown status {status!r}; use firing or resolved"}, 400)
        rows = store.list_alerts(status=status, limit=max(1, min(limit, 500)))
        return JSONResponse(jsonable_encoder([{k: r.get(k) for k in _ALERT_FIELDS} for r in rows]))

    # ------------------------------------------------------------------ Prometheus
    from runtime_ops.observability.collector import RuntimeOpsCollector, metrics_registry

    collector = RuntimeOpsCollector(
        store, (lambda: dagster_instance) if dagster_instance is not None else None, clock=now
    )
    app.state.metrics_collector = collector
    registry = metrics_registry(collector)

    @app.get("/metrics")
    def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        try:
            body = generate_latest(registry)
        except Exception as exc:  # each source is guarded in the collector; this is the last resort, still no 500
            collector.error("render", exc)
            fallback = CollectorRegistry(auto_describe=False)
            for family in collector.health():
                fallback.register(_Fixed(family))
            body = generate_latest(fallback)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        try:
            with store.tx() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:
            return JSONResponse({"status": "unavailable", "error": type(exc).__name__}, 503)
        return JSONResponse({"status": "ready"})

    return app


# FastAPI's native OpenTelemetry support turns on once a tracer provider is set, which runtime_ops does. Off:
# its server and operation spans cost ~0.4 ms of CPU per Slack click (4 spans per request; the click benchmark
# fell from 0.57x to 0.49x of the bare endpoint), and what matters here is already a span of ours, the
# `approval.decision` linked to its request. Its metrics and log records would duplicate /metrics and our logs.
_TELEMETRY: dict[str, Any] = {"tracing": False, "metrics": False, "logs": False}


class _Fixed:
    """A collector that yields one ready family (the /metrics fallback)."""

    def __init__(self, family: Any) -> None:
        self.family = family

    def collect(self) -> Any:
        yield self.family


def _signature_problem(verifier: Any, body: bytes, headers: Any) -> str | None:
    ts = headers.get("x-slack-request-timestamp")
    sig = headers.get("x-slack-signature")
    if not ts or not sig:
        return "missing X-Slack-Request-Timestamp or X-Slack-Signature"
    try:
        int(ts)
    except ValueError:
        return "non-numeric X-Slack-Request-Timestamp"
    if abs(verifier.clock.now() - int(ts)) > 300:
        return "timestamp older than 5 minutes (replay?)"
    return None if verifier.is_valid_request(body, dict(headers)) else "signature does not match"


def _link_use(store: StateStore, nonce: str) -> dict[str, Any] | None:
    with store.tx() as conn:
        row = conn.execute(select(t.link_uses).where(t.link_uses.c.nonce == nonce)).first()
        return dict(row._mapping) if row else None
