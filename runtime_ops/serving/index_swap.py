"""Where the serving index is swapped: the one writer of a pipeline's `retrieval_index` alias (the index
`/api/search`, `/api/answer` and rag_answers serve). No Dagster here.

Whoever built an index (the retrieval_index asset, a promotion's or a rollback's saga and its compensation, a
re-embedding) moves the alias only through `move_retrieval_index`: under the pipeline's promotion lock, with the
lease's fencing token, after reading `production` again inside the lock. An index built for a model that is not
production any more (a promotion, rollback or compensation finished while it was being built, which takes minutes)
is not served: the writer stands down and says why, and the alias stays where the winner put it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime_ops.labels import index_label, version_label
from runtime_ops.locks.base import Lease, Locker
from runtime_ops.locks.promotion import promotion_lease
from runtime_ops.store import StateStore
from runtime_ops.store.registry.registry import Registry
from runtime_ops.store.serving.indexes import READY, Indexes
from runtime_ops.tags import PRODUCTION_ALIAS, SERVING_INDEX_ALIAS
from runtime_ops.vectors.base import VectorStore


@dataclass(frozen=True)
class IndexMove:
    """What the writer did: `serving` is the alias's target afterwards, `previous` before; `moved` is False when
    it was already there or the writer stood down (`stood_down` says why)."""

    moved: bool
    serving: int | None
    previous: int | None
    production: int | None
    fence: int
    message: str
    stood_down: str | None = None


def move_retrieval_index(
    registry: Registry,
    indexes: Indexes,
    lock: Locker | Lease,
    index_id: int | None,
    *,
    actor: str,
    run_id: str | None = None,
    approval_id: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> IndexMove:
    """Point `retrieval_index` at `index_id` (None: remove it, allowed only while production is unset) when that
    index is complete and built for the production model as it is now.

    `lock` is a locker (the promotion lock is taken for this call) or the lease of the promotion lock the caller
    already holds (a saga step: the same lease, no second acquisition).
    """
    assert registry.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    with promotion_lease(lock, registry.pipeline) as lease:
        production = registry.alias(PRODUCTION_ALIAS)
        previous = registry.alias(SERVING_INDEX_ALIAS)
        refusal = _refusal(indexes, index_id, production)
        if refusal is not None:
            stays = f"stays at {index_label(previous)}" if previous is not None else "stays unset"
            message = f"{SERVING_INDEX_ALIAS} {stays}: {refusal}"
            log(message)
            return IndexMove(False, previous, previous, production, lease.fence, message, stood_down=refusal)
        if previous == index_id:
            message = (
                f"{SERVING_INDEX_ALIAS} already serves {index_label(index_id)} (model {version_label(production)})"
            )
            return IndexMove(False, previous, previous, production, lease.fence, message)
        if index_id is None:
            registry.remove_alias(SERVING_INDEX_ALIAS, actor=actor, run_id=run_id, fence=lease.fence)
        else:
            registry.set_alias(
                SERVING_INDEX_ALIAS, index_id, actor=actor, approval_id=approval_id, run_id=run_id, fence=lease.fence
            )
        what = f"model {version_label(production)}" if index_id is not None else "production is unset"
        message = f"{SERVING_INDEX_ALIAS}: {index_label(previous)} -> {index_label(index_id)} ({what})"
        log(message)
        return IndexMove(True, index_id, previous, production, lease.fence, message)


def _refusal(indexes: Indexes, index_id: int | None, production: int | None) -> str | None:
    """Why `index_id` must not serve while production is `production` (None: it may)."""
    if index_id is None:
        if production is None:
            return None
        return f"it is removed only while production is unset, and production is {version_label(production)}"
    row = indexes.get_index(index_id)
    if row is None:
        raise LookupError(f"index {index_label(index_id)} is not an index of pipeline {indexes.pipeline!r}")
    built_for = int(row["model_version"])
    if built_for != production:
        return (
            f"index {index_label(index_id)} was built for {version_label(built_for)} but production is now "
            f"{version_label(production)}"
        )
    if row["status"] != READY:
        return f"index {index_label(index_id)} of {version_label(built_for)} is {row['status']}, not ready"
    return None


def production_index(indexes: Indexes, vectors: VectorStore, version: int | None) -> int | None:
    """The complete index of `version` in `vectors` (None: no version, or it has none there)."""
    if version is None:
        return None
    row = indexes.index_for(version, vectors.kind, vectors.describe())
    return int(row["id"]) if row is not None and row["status"] == READY else None


def serve_production(
    store: StateStore,
    lease: Lease,
    vectors: VectorStore,
    *,
    actor: str,
    run_id: str | None = None,
    approval_id: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> IndexMove:
    """Bring `retrieval_index` to production's index (filled or brought up to date first), under the promotion
    lease the caller holds: serving follows production at once, e.g. after a rollback."""
    # numpy: kept out of the code location's load
    from runtime_ops.serving.vector_index import ensure_index

    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    with promotion_lease(lease, store.pipeline) as held:
        production = store.registry.alias(PRODUCTION_ALIAS)
        index_id = None
        if production is not None:
            index_id = ensure_index(store, vectors, production, log=log, run_id=run_id).index_id
        return move_retrieval_index(
            store.registry, store.indexes, held, index_id, actor=actor, run_id=run_id, approval_id=approval_id, log=log
        )
