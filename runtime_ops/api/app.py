"""The ops API: `create_app` assembles it; each route lives in `runtime_ops.api.routes.<concern>`.

| route | module |
|---|---|
| `POST /slack/interactions` | `routes/slack.py` |
| `GET/POST /approvals/{token}` | `routes/approval_pages.py` |
| `GET /api/approvals`, `POST /api/approvals/{id}/approve`, `.../reject` | `routes/approvals.py` |
| `POST /alerts/alertmanager`, `GET /api/alerts` | `routes/alerts.py` |
| `POST /webhooks/landing` | `routes/landing.py` |
| `GET /metrics` | `routes/metrics.py` |
| `POST /api/search`, `POST /api/answer` | `routes/search.py` |
| `POST /api/feedback` | `routes/feedback.py` |
| `GET /healthz`, `GET /readyz` | `routes/health.py` |
| `GET /openapi.json`, `GET /docs`, `GET /docs/assets/*` | `routes/docs.py` |

What the routes share (settings, state store, clock, link secret, Slack) is built here once and handed to
them as FastAPI dependencies (`runtime_ops.api.deps`). Handlers are plain `def`s or await only the request
body: each does one short state-store transaction in the thread pool, so a Slack click is acknowledged well
within Slack's 3 seconds; Slack message updates run after the response.

Every route authenticates its caller: Slack by its signature, approval pages by the link's signature, the
Alertmanager and landing webhooks by their tokens, and everything else (`/api/*`, `/metrics`, `/openapi.json`,
`/docs`) by a scoped API key, `runtime_ops.api.auth.require_scope(scope)` (keys are made with `runtime-ops keys
create`). Only `/healthz` and `/readyz` answer anyone: they say nothing but up or down (`/readyz` also names the
pipelines still warming up, or serving no index yet: `runtime_ops.api.searchers`).

At the edges (outermost first): trusted proxies' headers (`OpsApp`), security headers (`headers.py`), the body
limit and quiet disconnects (`guards.py`); read deadlines and uvicorn's settings are in `server.py`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, cast

import anyio
from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.types import ASGIApp
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from runtime_ops import clock as default_clock
from runtime_ops.api.deps import OpsContext
from runtime_ops.api.guards import BodyLimit, Disconnects
from runtime_ops.api.headers import SecurityHeaders
from runtime_ops.api.redis_buckets import RedisBuckets
from runtime_ops.api.refusals import Refusals
from runtime_ops.api.routes import (
    alerts,
    approval_pages,
    approvals,
    docs,
    feedback,
    health,
    landing,
    metrics,
    rollouts,
    search,
    slack,
)
from runtime_ops.api.searchers import ServingWarmup
from runtime_ops.approvals.announce import Announcer, sensor_interval
from runtime_ops.approvals.slack.client import SlackNotifier, slack_client
from runtime_ops.approvals.slack.signing import SlackSignature
from runtime_ops.approvals.stage_evidence import StageRule
from runtime_ops.components.loading import load_specs
from runtime_ops.observability.logs import register_settings_secrets
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.policies.refusals import RefusalPolicy
from runtime_ops.settings import Settings, get_settings
from runtime_ops.store import open_store

log = logging.getLogger("runtime_ops.api")

# Fewer threads than database connections: extra threads only queue on the pool and stretch the tail.
_THREADS = 10

# FastAPI's native OpenTelemetry support turns on once a tracer provider is set, which runtime_ops does. Off:
# its server and operation spans cost ~0.4 ms of CPU per Slack click (4 spans per request; the click benchmark
# fell from 0.57x to 0.49x of the bare endpoint), and what matters here is already a span of ours, the
# `approval.decision` linked to its request. Its metrics and log records would duplicate /metrics and our logs.
_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


def create_app(
    settings: Settings | None = None, clock: Callable[[], datetime] | None = None, dagster_instance: Any = None
) -> FastAPI:
    """`clock`: what "now" is (tests move it). `dagster_instance`: the instance /metrics reads runs and step
    events from; by default `DagsterInstance.get()` when DAGSTER_HOME is set (the one the daemon and run
    workers write)."""
    settings = settings or get_settings()
    ops = build_context(settings, clock or default_clock.now)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = _THREADS
        # Each pipeline's embedder and index are loaded before /readyz says ready, and again after a promotion.
        app.state.warmup.start()
        app.state.query_logging.writer.start()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_flush_refusals, ops)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
        await anyio.to_thread.run_sync(app.state.warmup.stop)
        app.state.searchers.close()  # the rollouts' shadow executors
        # The query log's records still in memory are written before the process ends.
        await anyio.to_thread.run_sync(app.state.query_logging.writer.stop)
        await anyio.to_thread.run_sync(lambda: ops.refusals.flush(final=True))
        if ops.refusals.shared is not None:
            ops.refusals.shared.close()

    # The schema and the Swagger page are served by routes/docs.py, behind a `read` key, not by FastAPI's open ones.
    app = OpsApp(
        settings,
        title="runtime_ops ops API",
        version="1",
        lifespan=lifespan,
        telemetry=_TELEMETRY,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    # Outermost last: the size limit runs before anything reads a body; a client gone while it was read is a line.
    app.add_middleware(BodyLimit)
    app.add_middleware(Disconnects)
    app.state.ops = ops
    app.state.store = ops.store
    announcer = ops.announcer
    metrics.install_metrics(
        app,
        ops.store,
        dagster_instance,
        ops.now,
        lambda pipeline, ramp: (
            announcer.stage_rule(pipeline).min_queries if ramp else announcer.online_policy(pipeline).min_queries
        ),
    )
    search.install_search(app, ops, app.state.metrics_registry)
    app.state.warmup = ServingWarmup(app.state.searchers)
    for module in (
        landing,
        slack,
        approval_pages,
        approvals,
        rollouts,
        alerts,
        metrics,
        health,
        search,
        feedback,
        docs,
    ):
        app.include_router(module.router)
    return app


class OpsApp(FastAPI):
    """FastAPI with what must wrap even its error handler (Starlette's outermost middleware), so that a 500 has it
    too: the proxy headers of trusted proxies first (the client and scheme everything after relies on; none unless
    FORWARDED_ALLOW_IPS lists them), then the security headers (`runtime_ops.api.headers`)."""

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        self.edge_settings = settings
        super().__init__(**kwargs)

    def build_middleware_stack(self) -> ASGIApp:
        settings = self.edge_settings
        app: ASGIApp = SecurityHeaders(
            super().build_middleware_stack(), https_public=settings.public_url.startswith("https://")
        )
        if settings.forwarded_allow_ips:
            # uvicorn's own ProxyHeadersMiddleware, as a plain ASGI wrapper (its ASGI types are uvicorn's aliases).
            proxied: Any = ProxyHeadersMiddleware(cast(Any, app), trusted_hosts=list(settings.forwarded_allow_ips))
            app = proxied
        return app


async def _flush_refusals(ops: OpsContext) -> None:
    """Write each window's summary of refusals soon after it closes, even when no further refusal comes."""
    while True:
        await anyio.sleep(max(1.0, ops.refusals.policy.window_s / 4))
        try:
            await anyio.to_thread.run_sync(ops.refusals.flush)
        except Exception:  # the store is down: the summary waits for the next try
            log.exception("could not write the refusal summaries; retrying")


def build_context(settings: Settings, now: Callable[[], datetime]) -> OpsContext:
    """Open the state store and wire Slack from the settings: Slack posting needs a bot token and a channel,
    Slack interactivity a signing secret; without them approvals fall back to signed links in the log."""
    # The pipelines' declarations are checked before anything is served: one that would let anyone approve its
    # promotions (Slack or a public URL, no approvers) stops the API here, naming the setting.
    specs = load_specs(settings)
    # Unscoped: the API serves every pipeline's requests (ids are global; each row names its pipeline).
    store = open_store(settings.resolved_database_url, settings, pipeline=None, check=True)
    link_secret = settings.resolved_link_secret()
    register_settings_secrets(settings, link_secret)
    notifier = None
    if settings.slack_bot_token:
        # Updates go to the channel recorded on each request (each pipeline has its own); the API posts nothing new.
        client = slack_client(settings.slack_bot_token.get_secret_value(), settings.slack_api_url)
        notifier = SlackNotifier(client, settings.slack_approval_channel or "", hooks_url=settings.slack_hooks_url)
    announcer = Announcer(
        store,
        link_secret,
        settings.public_url,
        settings.dagster_url,
        notifier,
        sensor_interval_s=sensor_interval(settings),
        online_policy=lambda pipeline: specs[pipeline].gate.online if pipeline in specs else OnlinePolicy(),
        stage_rule=lambda pipeline: (
            StageRule.of(specs[pipeline].rollout, specs[pipeline].gate.online) if pipeline in specs else StageRule()
        ),
    )
    signature = None
    if settings.slack_signing_secret:
        signature = SlackSignature(settings.slack_signing_secret.get_secret_value(), now)
    return OpsContext(
        settings=settings,
        store=store,
        now=now,
        link_secret=link_secret,
        announcer=announcer,
        slack_signature=signature,
        refusals=Refusals(store.audit_log, now, shared=_shared_buckets(settings)),
    )


def _shared_buckets(settings: Settings) -> RedisBuckets | None:
    """The refusal limiter's buckets in Redis when REDIS_URL is set: the API's replicas then share one limit."""
    if not settings.redis_url:
        return None
    policy = RefusalPolicy()
    return RedisBuckets(settings.redis_url, burst=policy.burst, per_second=policy.per_second)
