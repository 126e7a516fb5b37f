"""Filling a model version's index in shards, one Dagster partition each (glue over the store and a vector store).

A re-embedding for a new model is the heavy part of a promotion: every chunk of the corpus goes through the model.
Split by `Shard` (chunk id modulo the shard count), it is a backfill whose partitions run side by side, each on its
own worker: a partition embeds its shard's chunks that have no vector yet (committed page by page, so a killed run
resumes where it stopped), upserts them into the version's `filling` index and records the shard filled with the sum
of its vectors. The partition that finds every shard filled finishes the index (`fill_index`: replay the change feed
since the index was created, optimize, mark it ready). Until then `fill_index` refuses (`IndexIncomplete`), so a
promotion never serves a half-filled index.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from runtime_ops.embedders.base import TextEmbedder
from runtime_ops.embedders.registry import load_embedder
from runtime_ops.faults import failpoint
from runtime_ops.policies.drift import Centroid
from runtime_ops.serving.indexing import EMBED_BATCH, embed_missing
from runtime_ops.serving.vector_index import fill_index, filling_index, index_name_of, stack_vectors
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.embeddings import Shard
from runtime_ops.store.serving.indexes import READY, ShardProgress
from runtime_ops.vectors.base import VectorStore

Log = Callable[[str], None]
# Held around the few writes that two partitions must not interleave: creating the index (row and table), a
# shard's upserts (LanceDB commits one writer at a time) and the finishing replay.
Guard = Callable[[], AbstractContextManager[object]]


@dataclass(frozen=True)
class ShardState:
    index_id: int
    model_version: int
    shard: Shard
    embedded: int  # chunks this run embedded (the rest of the shard was embedded before: a resumed run)
    upserted: int
    progress: ShardProgress  # of every shard, after this one
    finished: bool  # this run found every shard filled and made the index ready
    already_ready: bool  # the index was complete before this run: nothing to do


def fill_shard(
    store: StateStore,
    vectors: VectorStore,
    version: int,
    shard: Shard,
    *,
    guard: Guard,
    log: Log = lambda _: None,
    run_id: str | None = None,
    embedder: TextEmbedder | None = None,
) -> ShardState:
    """Embed and index one shard of `version`'s corpus; the last shard to be filled finishes the index."""
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    if row is not None and row["status"] == READY:
        progress = store.indexes.shard_progress(int(row["id"]))
        log(f"the index of model v{version} is complete already (#{row['id']}): nothing to fill")
        return ShardState(int(row["id"]), version, shard, 0, 0, progress, False, True)
    embedder = embedder or load_embedder(store.registry, store.artifacts, version)
    with guard():
        row = filling_index(store.indexes, store.changes, vectors, version, embedder.dim, run_id=run_id, log=log)
        store.indexes.plan_shards(int(row["id"]), shard.count)
        vectors.open(index_name_of(store.pipeline, version), embedder.dim, create=True)
    # The long part, outside the guard: partitions embed side by side.
    embedded = embed_missing(store, version, log, embedder=embedder, shard=shard)
    centroid = Centroid.empty(embedder.dim)
    upserted = 0
    with guard():
        index = vectors.open(index_name_of(store.pipeline, version), embedder.dim)
        for page in store.embeddings.iter_current_vectors(version, batch_size=EMBED_BATCH * 4, shard=shard):
            vecs = stack_vectors([r for _, _, r in page], index.dim)
            index.upsert([c for c, _, _ in page], [d for _, d, _ in page], vecs)
            centroid.add(vecs)
            upserted += len(page)
        failpoint("index.shard")
        store.indexes.mark_shard_filled(
            int(row["id"]), shard.index, chunks=upserted, centroid_sum=centroid.to_bytes(), run_id=run_id
        )
        progress = store.indexes.shard_progress(int(row["id"]))
        log(f"shard {shard.index} of {shard.count} of model v{version}: {upserted} chunks indexed ({embedded} "
            f"embedded now); {len(progress.filled)}/{progress.count} shards filled")  # fmt: skip
        finished = False
        if progress.complete:
            current = store.indexes.get_index(int(row["id"]))
            if current is not None and current["status"] != READY:
                state = fill_index(store, vectors, version, log=log, run_id=run_id, embedder=embedder)
                log(f"the index of model v{version} is complete: #{state.index_id}, {state.n_chunks} chunks")
                finished = True
    return ShardState(int(row["id"]), version, shard, embedded, upserted, progress, finished, False)
