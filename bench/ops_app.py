"""The real ops API for the benchmarks: `python -m uvicorn --factory bench.ops_app:create_app` (and, for the query log
benchmark's baseline, `bench.ops_app:create_app_without_query_log`).

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
