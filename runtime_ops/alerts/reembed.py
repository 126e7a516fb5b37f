"""Re-embed: recompute the production model's vectors for one landing batch (or the whole corpus) and swap in
the rebuilt retrieval index. No Dagster here (the op in `alerts.jobs` calls it).

The stored vectors are dropped and recomputed with the same incremental, resumable pass the serving assets use
(`embed_missing`: a killed run resumes where it stopped). The index is rebuilt and swapped under the promotion
lock with a fenced write, and only while production is still the model that was re-embedded: a promotion that
happened meanwhile built its own index and wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime_ops.locks.base import LockerBase
from runtime_ops.models.promotion import LOCK_TTL_MS, LOCK_WAIT_S, lock_name
from runtime_ops.store import StateStore


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
    locker: LockerBase,
    *,
    batch_id: str | None,
    run_id: str | None,
    log: Callable[[str], None] = lambda _: None,
) -> ReembedOutcome:
    from runtime_ops.serving.indexing import build_index, embed_missing

    version = store.registry.alias("production")
    if version is None:
        raise ReembedRefused("no production model: nothing is embedded yet")
    if batch_id is not None and store.ledger.get_batch(batch_id) is None:
        raise ReembedRefused(f"landing batch {batch_id!r} is not in the state store")
    scope = f"landing batch {batch_id}" if batch_id else "the whole corpus"
    dropped = store.embeddings.drop_embeddings(version, batch_id=batch_id)
    log(f"dropped {dropped} vectors of model v{version} for {scope}")
    embedded = embed_missing(store, version, log)
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    with locker.hold(lock_name(store.pipeline), ttl_ms=LOCK_TTL_MS, wait_s=LOCK_WAIT_S) as lease:
        if store.registry.alias("production") != version:
            message = (
                f"re-embedded {embedded} chunks of {scope} with v{version}, but production moved to "
                f"v{store.registry.alias('production')} meanwhile: its promotion built the index, nothing swapped"
            )
            log(message)
            return ReembedOutcome(version, batch_id, dropped, embedded, None, False, lease.fence, message)
        built = build_index(store, version, run_id)
        previous = store.registry.alias("retrieval_index")
        swapped = previous != built.index_id
        if swapped:
            store.registry.set_alias(
                "retrieval_index", built.index_id, actor=f"reembed:{run_id}", run_id=run_id, fence=lease.fence
            )
    message = f"re-embedded {embedded} chunks of {scope} with v{version}; retrieval_index " + (
        f"#{previous} -> #{built.index_id}" if swapped else f"#{built.index_id} unchanged (identical vectors)"
    )
    log(message)
    return ReembedOutcome(version, batch_id, dropped, embedded, built.index_id, swapped, lease.fence, message)
