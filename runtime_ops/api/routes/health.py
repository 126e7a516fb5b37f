"""`GET /healthz` (the process answers) and `GET /readyz` (and its state store does)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from runtime_ops.api.deps import StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(store: StoreDep) -> JSONResponse:
    try:
        with store.tx() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return JSONResponse({"status": "unavailable", "error": type(exc).__name__}, 503)
    return JSONResponse({"status": "ready"})
