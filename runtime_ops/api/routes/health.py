"""`GET /healthz` (the process answers) and `GET /readyz` (and its state store does, and every pipeline's serving
index is loaded: `runtime_ops.api.searchers`).

Both are anonymous: they say whether the store is ready, unreachable, damaged or otherwise unavailable, and which
pipelines still warm up, and nothing else (no file, host, user or database name, no driver message). What is wrong
and the fix go to the log, redacted.
"""

from __future__ import annotations

import logging
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
log = logging.getLogger("runtime_ops.api.health")


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


# The integrity check reads the whole SQLite file: at most once this often, not on every probe. A problem is logged
# as often at most, and at once when it changes.
CHECK_EVERY_S = 30.0
_checked: dict[str, tuple[float, integrity.StateStoreError | None]] = {}  # store URL -> (when, problem)
_logged: dict[str, tuple[float, str]] = {}  # store URL -> (when, message)


def _problem(store: StateStore) -> integrity.StateStoreError | None:
    key = str(store.engine.url)  # the password masked
    at, problem = _checked.get(key, (float("-inf"), None))
    if time.monotonic() - at >= CHECK_EVERY_S:
        try:
            integrity.check(store.engine, head_revision())
            problem = None
        except integrity.StateStoreError as exc:
            problem = exc
        _checked[key] = (time.monotonic(), problem)
    return problem


def _log_once_in_a_while(store: StateStore, message: str) -> None:
    key = str(store.engine.url)
    at, last = _logged.get(key, (float("-inf"), ""))
    if message != last or time.monotonic() - at >= CHECK_EVERY_S:
        log.warning("readyz: not ready: %s", message)
        _logged[key] = (time.monotonic(), message)


def _not_ready(store: StateStore, problem: integrity.StateStoreError) -> JSONResponse:
    _log_once_in_a_while(store, str(problem))
    if isinstance(problem, integrity.StateUnreachable):
        status = "unreachable"
    elif isinstance(problem, integrity.StateDamaged):
        status = "damaged"
    else:
        status = "unavailable"
    return JSONResponse({"status": status, "error": f"state store {status}; the ops API's log says why"}, 503)


@router.get("/readyz")
def readyz(store: StoreDep, warmup: Annotated[ServingWarmup, Depends(get_warmup)]) -> JSONResponse:
    """Ready when the state store answers and is whole (quick_check and schema revision, every 30 s) and every
    pipeline's serving index is loaded (or it has none yet, which the body says)."""
    try:
        with store.tx() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        _checked.pop(str(store.engine.url), None)  # a failing store is checked now, not in 30 s
        problem = _problem(store)
        if problem:
            return _not_ready(store, problem)
        # The check passed just after the probe failed: a passing blip (a dropped connection, a busy database).
        _log_once_in_a_while(store, f"the state store failed a probe ({type(exc).__name__}: {exc})")
        return JSONResponse(
            {"status": "unavailable", "error": "state store unavailable; the ops API's log says why"}, 503
        )
    problem = _problem(store)
    if problem:
        return _not_ready(store, problem)
    left = warmup.left()
    if left:
        return JSONResponse({"status": f"warming up: {', '.join(left)}"}, 503)
    notes = warmup.notes()
    return JSONResponse({"status": "ready", **({"note": notes} if notes else {})})
