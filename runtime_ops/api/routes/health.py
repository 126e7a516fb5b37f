"""`GET /healthz` (the process answers) and `GET /readyz` (and its state store does, and every pipeline's serving
index is loaded: `runtime_ops.api.searchers`)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from sqlalchemy import text

from runtime_ops.api.deps import StoreDep
from runtime_ops.api.searchers import ServingWarmup, get_warmup
from runtime_ops.store import StateStore, integrity
from runtime_ops.store.migrate import head_revision

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


# The integrity check reads the whole SQLite file: at most once this often, not on every probe.
CHECK_EVERY_S = 30.0
_checked: dict[str, tuple[float, str | None]] = {}  # store URL -> (when, problem)


def _damage(store: StateStore) -> str | None:
    url = str(store.engine.url)
    at, problem = _checked.get(url, (float("-inf"), None))
    if time.monotonic() - at >= CHECK_EVERY_S:
        try:
            integrity.check(store.engine, head_revision())
            problem = None
        except integrity.StateDamaged as exc:
            problem = str(exc)
        _checked[url] = (time.monotonic(), problem)
    return problem


@router.get("/readyz")
def readyz(store: StoreDep, warmup: Annotated[ServingWarmup, Depends(get_warmup)]) -> JSONResponse:
    """Ready when the state store answers and is whole (quick_check and schema revision, every 30 s) and every
    pipeline's serving index is loaded (or it has none yet, which the body says). A damaged store is named with its
    fix, so the probe's failure says what to do."""
    try:
        with store.tx() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        _checked.pop(str(store.engine.url), None)  # a failing store is checked now, not in 30 s
        problem = _damage(store)
        if problem:
            return JSONResponse({"status": "damaged", "error": problem}, 503)
        return JSONResponse({"status": "unavailable", "error": type(exc).__name__}, 503)
    problem = _damage(store)
    if problem:
        return JSONResponse({"status": "damaged", "error": problem}, 503)
    left = warmup.left()
    if left:
        return JSONResponse({"status": f"warming up: {', '.join(left)}"}, 503)
    notes = warmup.notes()
    return JSONResponse({"status": "ready", **({"note": notes} if notes else {})})
