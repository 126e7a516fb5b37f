"""Promotion as a saga under the promotion lock: move `production`, build and swap the index, announce.

Every alias write carries the lock's fencing token, so a holder that paused past its lease cannot overwrite a
newer promotion; the serving index moves only through its one writer (`serving.index_swap`), with the saga's own
lease. Each step is persisted; a failure compensates the completed steps in reverse (production moves back and the
serving index with it, the announcement is retracted), and a crash is finished by the next run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_ops.faults import failpoint
from runtime_ops.labels import index_label, version_label
from runtime_ops.locks.base import Lease
from runtime_ops.locks.promotion import LOCK_TTL_MS as LOCK_TTL_MS
from runtime_ops.locks.promotion import LOCK_WAIT_S as LOCK_WAIT_S
from runtime_ops.locks.promotion import lock_name as lock_name
from runtime_ops.saga.engine import SagaState, Step
from runtime_ops.serving.index_swap import move_retrieval_index, production_index
from runtime_ops.serving.vector_index import ensure_index, incomplete_backfill
from runtime_ops.store import StateStore
from runtime_ops.store.operations.sagas import Sagas
from runtime_ops.store.serving.indexes import Indexes
from runtime_ops.tags import PRODUCTION_ALIAS, SERVING_INDEX_ALIAS
from runtime_ops.vectors.base import VectorStore


class StoreJournal:
    """Saga state in the state store's `sagas` table."""

    def __init__(self, sagas: Sagas, owner: str | None, kind: str = "promotion") -> None:
        self.sagas, self.owner, self.kind = sagas, owner, kind

    def load(self, saga_id: str) -> SagaState | None:
        row = self.sagas.load_saga(saga_id)
        if row is None:
            return None
        return SagaState(saga_id, status=row["status"], steps=list(row["steps"] or []), error=row["error"])

    def save(self, state: SagaState) -> None:
        self.sagas.save_saga(
            state.saga_id, kind=self.kind, status=state.status, steps=state.steps, error=state.error, owner=self.owner
        )


def backfill_refusal(indexes: Indexes, vectors: VectorStore, version: int) -> str | None:
    """Why `version` cannot be promoted yet (a backfill is still filling its index), or None. Filling the rest
    inside the promotion would redo in one run, under the promotion lock, what the backfill spreads over many."""
    why = incomplete_backfill(indexes, vectors, version)
    return None if why is None else f"refusing to promote {version_label(version)} yet: {why}; promote again once it is"


def saga_id(request: dict[str, Any]) -> str:
    return f"promote-{request['id']}"


def promotion_steps(
    store: StateStore,
    vectors: VectorStore,
    *,
    version: int,
    request: dict[str, Any],
    lease: Lease | None,
    run_id: str | None,
    log: Callable[[str], None] = lambda _: None,
) -> list[Step]:
    """The saga's steps, each writing with `lease` (the promotion lock the caller holds; None only to `plan` a dry
    run, whose steps describe and never run)."""
    actor = request.get("decided_by") or "policy"

    def held() -> Lease:
        if lease is None:
            raise RuntimeError("a promotion step writes only under the promotion lock: pass the held lease")
        return lease

    def move_alias(ctx: dict[str, Any]) -> dict[str, Any]:
        fence = held().fence
        previous = store.registry.alias(PRODUCTION_ALIAS)
        serving = store.registry.alias(SERVING_INDEX_ALIAS)
        failpoint("promotion.alias")
        store.registry.set_alias(
            PRODUCTION_ALIAS, version, actor=actor, approval_id=request["id"], run_id=run_id, fence=fence
        )
        log(f"production: {version_label(previous)} -> {version_label(version)}")
        # The serving index of the previous production: where the compensation takes retrieval_index back to.
        return {"previous_production": previous, "previous_index": serving}

    def undo_alias(ctx: dict[str, Any], data: dict[str, Any]) -> None:
        fence = held().fence
        previous = data.get("previous_production")
        if previous is None:
            store.registry.remove_alias(PRODUCTION_ALIAS, actor="compensation", run_id=run_id, fence=fence)
        else:
            store.registry.set_alias(
                PRODUCTION_ALIAS, previous, actor="compensation", approval_id=request["id"], run_id=run_id, fence=fence
            )
        log(f"compensated: production back to {version_label(previous)}")

        # Serving follows production back: to the index that served before, else (not production's, or a saga
        # journaled before `previous_index` was recorded) to the restored production's complete index.
        def serve(index_id: int | None) -> bool:
            move = move_retrieval_index(
                store.registry,
                store.indexes,
                held(),
                index_id,
                actor="compensation",
                run_id=run_id,
                approval_id=request["id"],
                log=log,
            )
            return move.stood_down is None

        if not ("previous_index" in data and serve(data["previous_index"])):
            serve(production_index(store.indexes, vectors, previous))

    def swap_index(ctx: dict[str, Any]) -> dict[str, Any]:
        # The new model's shadow index: filled from the whole corpus (or resumed), then in step with the feed.
        # The serving index is untouched until the alias moves, and stays intact afterwards for a rollback.
        state = ensure_index(store, vectors, version, log=log, run_id=run_id)
        failpoint("promotion.index")
        move = move_retrieval_index(
            store.registry,
            store.indexes,
            held(),
            state.index_id,
            actor=actor,
            approval_id=request["id"],
            run_id=run_id,
            log=log,
        )
        if move.serving != state.index_id:  # production is this saga's version under its own lock: cannot happen
            raise RuntimeError(move.message)
        log(f"index {index_label(state.index_id)} of model {version_label(version)}: {state.n_chunks} chunks")
        return {"previous_index": move.previous, "index_id": state.index_id}

    def undo_index(ctx: dict[str, Any], data: dict[str, Any]) -> None:
        # Nothing to write yet: production is still the new version here, so the one writer would rightly refuse
        # the old index. It returns with production, in the compensation of move_production_alias (next).
        log(f"compensated: retrieval_index returns to {index_label(data.get('previous_index'))} with production")

    def announce(ctx: dict[str, Any]) -> dict[str, Any]:
        failpoint("promotion.announce")
        store.audit_log.append(
            event="promoted",
            request_id=request["id"],
            actor=actor,
            channel="dagster",
            outcome="done",
            detail={"version": version, "previous": ctx.get("previous_production"), "run_id": run_id},
        )
        return {"announced": True}

    def retract(ctx: dict[str, Any], data: dict[str, Any]) -> None:
        store.audit_log.append(
            event="promotion_retracted",
            request_id=request["id"],
            channel="dagster",
            outcome="retracted",
            detail={"version": version, "run_id": run_id},
        )

    def describe_alias(ctx: dict[str, Any]) -> str:
        previous = store.registry.alias(PRODUCTION_ALIAS)
        return f"production: {version_label(previous)} -> {version_label(version)} (fenced write)"

    def describe_index(ctx: dict[str, Any]) -> str:
        counts = store.embeddings.embedding_counts(version)
        todo = counts["current_chunks"] - counts["embedded"]
        row = store.indexes.index_for(version, vectors.kind, vectors.describe())
        what = "bring its index up to date" if row is not None and row["status"] == "ready" else "fill its index"
        return (
            f"embed {todo} chunks with {version_label(version)}, {what} ({counts['current_chunks']} chunks in "
            f"{vectors.describe()}), retrieval_index: {index_label(store.registry.alias(SERVING_INDEX_ALIAS))} -> "
            "that index (fenced write)"
        )

    def describe_announce(ctx: dict[str, Any]) -> str:
        return f"record the promotion in the audit log of {request['id']}"

    return [
        Step("move_production_alias", move_alias, undo_alias, describe_alias),
        Step("swap_retrieval_index", swap_index, undo_index, describe_index),
        Step("announce", announce, retract, describe_announce),
    ]
