"""Re-embed: recompute the production model's vectors for one landing batch (or the whole corpus) and serve
them. No Dagster here (the op in `alerts.jobs` calls it).

The stored vectors are dropped and recomputed with the same incremental, resumable pass the serving assets use
(`embed_missing`: a killed run resumes where it stopped). Under the promotion lock, and only while production is
still the model that was re-embedded (a promotion that happened meanwhile serves its own index and wins), the new
vectors are upserted into the serving index in place, and the alias is moved by its one writer
(`serving.index_swap`, with the same lease) if it pointed elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime_ops.labels import index_label, version_label
from runtime_ops.locks.base import Locker
from runtime_ops.locks.promotion import promotion_lease
from runtime_ops.serving.index_swap import move_retrieval_index
from runtime_ops.store import StateStore
from runtime_ops.tags import PRODUCTION_ALIAS
from runtime_ops.vectors.base import VectorStore


class ReembedRefused(RuntimeError):
    """Nothing can be re-embedded (no production model, unknown batch); says why."""


@dataclass(frozen=True)
class ReembedOutcome:
    model_version: int
    batch_id: str | None
    dropped: int
    embedded: int
    index_id: int | None
    index_swapped: bool
    fence: int | None
    message: str


def run_reembed(
    store: StateStore,
    locker: Locker,
    vectors: VectorStore,
    *,
    batch_id: str | None,
    run_id: str | None,
    log: Callable[[str], None] = lambda _: None,
) -> ReembedOutcome:
    # numpy: kept out of the code location's load
    from runtime_ops.serving.indexing import embed_missing
    from runtime_ops.serving.vector_index import refresh_index

    version = store.registry.alias(PRODUCTION_ALIAS)
    if version is None:
        raise ReembedRefused("no production model: nothing is embedded yet")
    if batch_id is not None and store.ledger.get_batch(batch_id) is None:
        raise ReembedRefused(f"landing batch {batch_id!r} is not in the state store")
    scope = f"landing batch {batch_id}" if batch_id else "the whole corpus"
    dropped = store.embeddings.drop_embeddings(version, batch_id=batch_id)
    log(f"dropped {dropped} vectors of model {version_label(version)} for {scope}")
    embedded = embed_missing(store, version, log)
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    with promotion_lease(locker, store.pipeline) as lease:
        if store.registry.alias(PRODUCTION_ALIAS) != version:
            message = (
                f"re-embedded {embedded} chunks of {scope} with {version_label(version)}, but production moved to "
                f"{version_label(store.registry.alias(PRODUCTION_ALIAS))} meanwhile: its promotion serves its own "
                "index, nothing swapped"
            )
            log(message)
            return ReembedOutcome(version, batch_id, dropped, embedded, None, False, lease.fence, message)
        # The serving index is updated in place (upserts by chunk id): queries see old or new vectors, never none.
        state = refresh_index(store, vectors, version, batch_id=batch_id, log=log)
        move = move_retrieval_index(
            store.registry, store.indexes, lease, state.index_id, actor=f"reembed:{run_id}", run_id=run_id, log=log
        )
    message = f"re-embedded {embedded} chunks of {scope} with {version_label(version)}; index " + (
        f"{index_label(state.index_id)} now serves (was {index_label(move.previous)})"
        if move.moved
        else f"{index_label(state.index_id)} updated in place ({state.upserted} chunks)"
    )
    log(message)
    return ReembedOutcome(version, batch_id, dropped, embedded, state.index_id, move.moved, lease.fence, message)
