"""`GET /api/rollouts` and `GET /api/rollouts/{id}`: rollouts with their live evidence and the candidate's lifecycle (a
`read` key). `POST /api/rollouts/{id}/stop` and `POST /api/rollback`: an operator's stop and rollback, by an API key
with the `decide` scope mapped to an approver id, audited as that approver, through the candidate lifecycle like
the CLI's `runtime-ops rollouts stop` and `runtime-ops rollback`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from starlette.concurrency import run_in_threadpool

from runtime_ops.api.auth import DecideKey, require_scope
from runtime_ops.api.deps import OpsDep, StoreDep
from runtime_ops.components.loading import PipelineConfigError, get_spec
from runtime_ops.controls.rollouts import (
    OperatorRefusal,
    list_rollouts,
    manual_rollback,
    show_rollout,
    stop_rollout,
)
from runtime_ops.locks.factory import open_locker
from runtime_ops.storable_text import unstorable
from runtime_ops.vectors.factory import pipeline_vector_store

router = APIRouter(tags=["rollouts"])


class OperatorBody(BaseModel):
    reason: str = Field(..., min_length=1, max_length=2000, description="why (recorded in the audit log)")

    @field_validator("reason")
    @classmethod
    def _storable(cls, v: str) -> str:
        problem = unstorable(v)
        if problem:
            raise ValueError(f"contains {problem}, which cannot be stored")
        if not v.strip():
            raise ValueError("is blank; say why")
        return v.strip()


class RollbackBody(OperatorBody):
    pipeline: str = Field(..., min_length=1, max_length=64)
    to_version: int = Field(..., ge=1, description="the model version production returns to")


def _refused(exc: Exception, status: int = 409) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, getattr(exc, "status", status))


def _operator(key: Any) -> str | None:
    return str(key.approver) if key.approver is not None else None


def _unmapped(key: Any) -> JSONResponse:
    message = f"API key {key.key_id} is not mapped to an approver id, so it cannot act as an operator"
    return JSONResponse({"error": f"{message}: create one with --approver"}, 403)


@router.get("/api/rollouts", dependencies=[Depends(require_scope("read"))])
def rollouts(store: StoreDep, pipeline: str | None = None, limit: int = 20) -> JSONResponse:
    scoped = store.scoped(pipeline) if pipeline else store
    return JSONResponse(jsonable_encoder(list_rollouts(scoped, limit=max(1, min(limit, 200)))))


def _rollout_scope(store: Any, rollout_id: int) -> tuple[Any, Any]:
    row = store.rollouts.get(rollout_id)
    if row is None:
        raise OperatorRefusal(f"no rollout #{rollout_id}", 404)
    try:
        spec = get_spec(str(row["pipeline"]))
    except PipelineConfigError as exc:
        raise OperatorRefusal(f"rollout #{rollout_id}'s pipeline is not declared any more: {exc}", 409) from None
    return store.scoped(spec.name), spec


@router.get("/api/rollouts/{rollout_id}", dependencies=[Depends(require_scope("read"))])
def rollout(store: StoreDep, rollout_id: int) -> JSONResponse:
    try:
        scoped, spec = _rollout_scope(store, rollout_id)
        return JSONResponse(jsonable_encoder(show_rollout(scoped, rollout_id, spec.rollout, spec.gate.online)))
    except OperatorRefusal as exc:
        return _refused(exc)


@router.post("/api/rollouts/{rollout_id}/stop")
async def stop(rollout_id: int, body: OperatorBody, key: DecideKey, ops: OpsDep) -> JSONResponse:
    actor = _operator(key)
    if actor is None:
        return _unmapped(key)

    def work() -> dict[str, Any]:
        scoped, spec = _rollout_scope(ops.store, rollout_id)
        return stop_rollout(scoped, rollout_id, spec.rollout, actor=actor, reason=body.reason)

    try:
        stopped = await run_in_threadpool(work)
    except OperatorRefusal as exc:
        return _refused(exc)
    return JSONResponse(jsonable_encoder({"outcome": "stopped", "actor": actor, "rollout": stopped}))


@router.post("/api/rollback")
async def rollback(body: RollbackBody, key: DecideKey, ops: OpsDep) -> JSONResponse:
    """Roll a pipeline's production back to `to_version` now (the promotion saga under the promotion lock)."""
    actor = _operator(key)
    if actor is None:
        return _unmapped(key)
    try:
        spec = get_spec(body.pipeline)
    except PipelineConfigError as exc:
        return JSONResponse({"error": f"no pipeline {body.pipeline!r}: {exc}"}, 404)

    def work() -> dict[str, Any]:
        outcome = manual_rollback(
            ops.store.scoped(spec.name),
            open_locker(ops.settings),
            pipeline_vector_store(spec.vector_store),
            to_version=body.to_version,
            actor=actor,
            reason=body.reason,
            channel="api",
        )
        return {
            "outcome": outcome.status,
            "message": outcome.message,
            "actor": actor,
            "from_version": outcome.from_version,
            "to_version": outcome.to_version,
            "index_id": outcome.index_id,
        }

    try:
        return JSONResponse(await run_in_threadpool(work))
    except OperatorRefusal as exc:
        return _refused(exc)
