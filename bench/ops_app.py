"""The real ops API for the benchmarks: `python -m uvicorn --factory bench.ops_app:create_app` (and, for the query log
benchmark's baselines, `bench.ops_app:create_app_without_query_log` and `bench.ops_app:create_app_without_limits`).

Configured exactly as in production, from the runtime_ops environment variables the benchmark sets
(`RUNTIME_OPS_DATABASE_URL`, `SLACK_SIGNING_SECRET`, `RUNTIME_OPS_APPROVERS`, ...). No Slack bot token is
set, so no message updates run after the response: the benchmark measures the click, not Slack's API.
"""

from __future__ import annotations

from fastapi import FastAPI

from runtime_ops.api.app import create_app as create_ops_app
from runtime_ops.settings import load_settings


def create_app() -> FastAPI:
    settings = load_settings()
    if settings.slack_bot_token is not None:
        raise RuntimeError("bench.ops_app must not run with SLACK_BOT_TOKEN set: it would post to Slack")
    if not (settings.database_url or "").startswith("postgresql"):
        raise RuntimeError("bench.ops_app needs RUNTIME_OPS_DATABASE_URL pointing at PostgreSQL")
    return create_ops_app(settings)


def create_app_without_query_log() -> FastAPI:
    """The same ops API with the query log taken out of the request path (no record built, hashed or queued): the
    baseline of the query log benchmark (`bench/query_log.py`)."""
    app = create_app()
    app.state.query_logging.record = lambda *args, **kwargs: None
    return app


def create_app_without_limits() -> FastAPI:
    """The same ops API with the request limits (`api/request_limits.py`) and the feedback's binding to the key and
    session that searched (`online/feedback_binding.py`) taken out: the previous release's request path, the
    baseline of the query log benchmark's `search_p50_limits` and `feedback_p50_bound` (`bench/query_log.py`)."""
    from runtime_ops.api.routes import feedback

    app = create_app()
    app.state.request_limits.check = lambda *args, **kwargs: None
    feedback.binding_refusal = lambda **kwargs: None  # the route looks it up on each request
    return app
