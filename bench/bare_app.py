"""The baseline: a bare FastAPI endpoint doing one INSERT into the same PostgreSQL.

It has the same shape as the ops API's Slack handler - an `async def` reading the raw body, then one
transaction in Starlette's thread pool - and the same engine settings as the state store, so the ratio
against it measures what the real endpoint does beyond "receive a request, write one row".

Served by `python -m uvicorn --factory bench.bare_app:create_app`; reads `BENCH_DATABASE_URL`.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, String, Table, create_engine, insert
from starlette.concurrency import run_in_threadpool

metadata = MetaData()
events = Table(
    "bench_bare_events",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("body_bytes", Integer, nullable=False),
    Column("note", String(64), nullable=False),
)


def create_app() -> FastAPI:
    # The state store's PostgreSQL engine: runtime_ops/store/store.py `_engine_for`.
    engine = create_engine(os.environ["BENCH_DATABASE_URL"], pool_pre_ping=True, pool_size=5, max_overflow=20)
    metadata.create_all(engine)
    stmt = insert(events)

    def write(n: int) -> None:
        with engine.begin() as conn:
            conn.execute(stmt.values(created_at=datetime.now(UTC), body_bytes=n, note="bare"))

    app = FastAPI(title="bench bare endpoint")

    @app.post("/insert")
    async def insert_one(request: Request) -> Response:
        body = await request.body()
        await run_in_threadpool(write, len(body))
        return Response(status_code=200)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
