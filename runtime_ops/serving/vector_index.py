"""Keeping a model version's vector index in step with the corpus (glue over the state store and a vector store).

- `fill_index`: a complete index of a version (a new model's shadow index, or the first one of a pipeline): every
  current chunk is embedded (once per version, `embed_missing`) and upserted, then the change feed is replayed from
  where the fill started. Resumable: a killed fill is resumed by the next call (upserts are idempotent).
- `sync_index`: an index that is already complete applies the change feed since its `synced_seq`: the chunks of
  documents that became current are embedded (only those without a vector) and upserted, documents that stopped
  being current are deleted. Cost: O(changes), whatever the corpus size.
- A backfill may fill the index in shards instead (`serving.shards`, one Dagster partition each): `fill_index` then
  refuses (`IndexIncomplete`) until every shard is filled, and afterwards only replays the feed on top.
- `ensure_index` does whichever is needed. Both commit the feed position only after the index writes, so a crash
  in between replays (idempotent) instead of skipping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_ops.documents.chunk_profiles import ensure_model_chunks
from runtime_ops.embedders.base import TextEmbedder
from runtime_ops.embedders.registry import load_embedder
from runtime_ops.faults import failpoint
from runtime_ops.policies.drift import BatchDrift, Centroid
from runtime_ops.serving.indexing import EMBED_BATCH, embed_missing, record_drift
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.changes import ADD, REMOVE, CorpusChanges
from runtime_ops.store.corpus.embeddings import Shard
from runtime_ops.store.serving.indexes import READY, Indexes, ShardProgress
from runtime_ops.vectors.base import IndexName, VectorIndex, VectorStore

Log = Callable[[str], None]
Observe = Callable[[list[str], np.ndarray], None]

# Changes applied per step of a sync (each step: one feed read, one upsert and one delete, then the position).
FEED_PAGE = 500


@dataclass(frozen=True)
class IndexState:
    index_id: int
    model_version: int
    filled: bool  # this call (re)filled the index from the whole corpus
    embedded: int  # chunks embedded by this call
    upserted: int
    removed: int
    synced_seq: int
    n_chunks: int


def stack_vectors(raw: list[bytes | None], dim: int) -> np.ndarray:
    return np.vstack([np.frombuffer(r, dtype="<f4") for r in raw if r is not None]).reshape(-1, dim)


def index_name_of(pipeline: str | None, version: int) -> IndexName:
    """`pipeline`: the store's scope (`store.pipeline`)."""
    assert pipeline is not None, "vector indexes belong to one pipeline: use a scoped store"
    return IndexName(pipeline, version)


def ensure_index(
    store: StateStore,
    vectors: VectorStore,
    version: int,
    *,
    log: Log = lambda _: None,
    run_id: str | None = None,
    observe: Observe | None = None,
    embedder: TextEmbedder | None = None,
) -> IndexState:
    """The index of `version` in `vectors`, complete and in step with the corpus (filled or synced as needed)."""
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    if row is None or row["status"] != READY:
        return fill_index(store, vectors, version, log=log, run_id=run_id, observe=observe, embedder=embedder)
    return sync_index(store, vectors, version, log=log, observe=observe, embedder=embedder)


def fill_index(
    store: StateStore,
    vectors: VectorStore,
    version: int,
    *,
    log: Log = lambda _: None,
    run_id: str | None = None,
    observe: Observe | None = None,
    embedder: TextEmbedder | None = None,
) -> IndexState:
    embedder = embedder or load_embedder(store.registry, store.artifacts, version)
    name = index_name_of(store.pipeline, version)
    # A fill sees every vector of the model: their sum is the corpus centroid later batches' drift is measured
    # from, recorded whoever fills (a promotion's shadow index or the serving assets).
    centroid = BatchDrift(None)

    def seen(texts: list[str], vecs: np.ndarray) -> None:
        centroid.observe(texts, vecs)
        if observe is not None:
            observe(texts, vecs)

    row = filling_index(store.indexes, store.changes, vectors, version, embedder.dim, run_id=run_id, log=log)
    shards = store.indexes.shard_progress(row["id"])
    if shards.planned and not shards.complete:
        raise IndexIncomplete(backfill_missing(version, shards))
    index = vectors.open(name, embedder.dim, create=True)
    embedded = upserted = 0
    if shards.complete:
        # Every shard's partition embedded and upserted its chunks and kept the sum of its vectors: the fill
        # only replays the feed on top.
        for total, count in store.indexes.shard_centroids(row["id"]):
            centroid.batch = (centroid.batch or Centroid.empty(embedder.dim)).plus(Centroid.from_bytes(total, count))
        log(f"index of model v{version}: {shards.count} shards filled ({shards.chunks} chunks), replaying changes "
            f"since #{row['synced_seq']}")  # fmt: skip
    else:
        embedded = embed_missing(store, version, log, embedder=embedder)
        for page in store.embeddings.iter_current_vectors(version, batch_size=EMBED_BATCH * 4):
            vecs = stack_vectors([r for _, _, r in page], index.dim)
            index.upsert([c for c, _, _ in page], [d for _, d, _ in page], vecs)
            seen([], vecs)  # no texts: a fill signals no OOV
            upserted += len(page)
            failpoint("index.fill")
        log(f"index of model v{version}: {upserted} chunks upserted, replaying changes since #{row['synced_seq']}")
    state = _apply_feed(store, index, version, int(row["synced_seq"]), row["id"], log, seen, embedder)
    index.optimize()
    n = index.count()
    record_drift(store.ledger, store.retraining, version, centroid, first=True, run_id=run_id)
    store.indexes.mark_synced(
        row["id"], synced_seq=state.synced_seq, n_chunks=n, corpus_revision=store.ledger.corpus_revision(), ready=True
    )
    return IndexState(
        row["id"],
        version,
        True,
        embedded + state.embedded,
        upserted + state.upserted,
        state.removed,
        state.synced_seq,
        n,
    )


class IndexIncomplete(LookupError):
    """The index is being filled in shards by a backfill and some are not filled yet."""


def backfill_missing(version: int, shards: ShardProgress) -> str:
    return (
        f"the index of model v{version} is being filled by a backfill of {shards.count} shards: "
        f"{len(shards.filled)} filled, {len(shards.missing)} to go (partitions "
        f"{', '.join(Shard(i, shards.count).key for i in shards.missing)} of shadow_embeddings); it is complete "
        "when every partition has been materialized (a killed partition run resumes where it stopped)"
    )


def incomplete_backfill(indexes: Indexes, vectors: VectorStore, version: int) -> str | None:
    """Why `version`'s index cannot be completed now (a backfill still filling its shards), or None."""
    row = indexes.index_for(version, vectors.kind, vectors.describe())
    if row is None or row["status"] == READY:
        return None
    shards = indexes.shard_progress(int(row["id"]))
    return backfill_missing(version, shards) if shards.planned and not shards.complete else None


def filling_index(
    indexes: Indexes,
    changes: CorpusChanges,
    vectors: VectorStore,
    version: int,
    dim: int,
    *,
    run_id: str | None,
    log: Log,
) -> dict[str, Any]:
    """The live index row of `version` in `vectors`, created (status `filling`) when there is none."""
    row = indexes.index_for(version, vectors.kind, vectors.describe())
    if row is None:
        # The feed position before the fill reads the corpus: changes committed during the fill are replayed.
        row = indexes.create_index(
            model_version=version,
            backend=vectors.kind,
            location=vectors.describe(),
            dim=dim,
            synced_seq=changes.head(),
            run_id=run_id,
        )
        log(f"new {vectors.kind} index of model v{version} ({index_name_of(indexes.pipeline, version).table}) in "
            f"{vectors.describe()}")  # fmt: skip
    return row


def sync_index(
    store: StateStore,
    vectors: VectorStore,
    version: int,
    *,
    log: Log = lambda _: None,
    observe: Observe | None = None,
    embedder: TextEmbedder | None = None,
) -> IndexState:
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    if row is None or row["status"] != READY:
        raise LookupError(f"model v{version} has no complete index in {vectors.describe()}: fill it first")
    embedder = embedder or load_embedder(store.registry, store.artifacts, version)
    index = vectors.open(index_name_of(store.pipeline, version), int(row["dim"] or embedder.dim))
    state = _apply_feed(store, index, version, int(row["synced_seq"]), row["id"], log, observe, embedder)
    if state.synced_seq == row["synced_seq"]:
        return IndexState(row["id"], version, False, 0, 0, 0, state.synced_seq, int(row["n_chunks"]))
    n = index.count()
    store.indexes.mark_synced(
        row["id"], synced_seq=state.synced_seq, n_chunks=n, corpus_revision=store.ledger.corpus_revision()
    )
    return IndexState(row["id"], version, False, state.embedded, state.upserted, state.removed, state.synced_seq, n)


def _apply_feed(
    store: StateStore,
    index: VectorIndex,
    version: int,
    since: int,
    index_id: int,
    log: Log,
    observe: Observe | None,
    embedder: TextEmbedder,
) -> IndexState:
    """Apply every change after `since`, a page at a time, recording the position after each page."""
    embedded = upserted = removed = 0
    position = since
    while changes := store.changes.since(position, FEED_PAGE):
        added = sorted({c.document_id for c in changes if c.op == ADD})
        gone = sorted({c.document_id for c in changes if c.op == REMOVE})
        # A document added then removed within the page is simply gone: the chunks query returns only current ones.
        ensure_model_chunks(store.documents, store.profiles, version, document_ids=added, log=log)
        rows = store.embeddings.chunks_of_documents(version, added)
        todo = [(cid, text) for cid, _, text, raw in rows if raw is None]
        fresh: dict[int, bytes] = {}
        for start in range(0, len(todo), EMBED_BATCH):
            page = todo[start : start + EMBED_BATCH]
            vecs = embedder.embed([text for _, text in page])
            store.embeddings.put_embeddings(version, zip([c for c, _ in page], vecs, strict=True))
            fresh.update((cid, np.asarray(v, dtype="<f4").tobytes()) for (cid, _), v in zip(page, vecs, strict=True))
            embedded += len(page)
            failpoint("embeddings.batch")  # after the page is committed, as in embed_missing
        if rows:
            vecs = stack_vectors([fresh.get(cid, vec) for cid, _, _, vec in rows], index.dim)
            index.upsert([r[0] for r in rows], [r[1] for r in rows], vecs)
            if observe is not None:  # every chunk that became current, embedded now or before (by an evaluation)
                observe([r[2] for r in rows], vecs)
            upserted += len(rows)
        if gone:
            removed += index.delete_documents(gone)
        failpoint("index.sync")
        position = changes[-1].seq
        store.indexes.advance(index_id, position)
    if position != since:
        log(f"index of model v{version}: applied changes #{since + 1}-#{position}: {upserted} chunks upserted "
            f"({embedded} embedded now), {removed} removed")  # fmt: skip
    return IndexState(index_id, version, False, embedded, upserted, removed, position, 0)


def refresh_index(
    store: StateStore, vectors: VectorStore, version: int, *, batch_id: str | None, log: Log = lambda _: None
) -> IndexState:
    """Upsert the stored vectors of `version` again (one landing batch's documents, or every current chunk): after
    a re-embedding replaced them, the index serves the new ones. A version without a complete index is filled."""
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    if row is None or row["status"] != READY:
        return fill_index(store, vectors, version, log=log)
    index = vectors.open(index_name_of(store.pipeline, version), int(row["dim"]))
    upserted = 0
    if batch_id is None:
        pages = store.embeddings.iter_current_vectors(version, batch_size=EMBED_BATCH * 4)
    else:
        docs = [int(d["id"]) for d in store.documents.batch_documents(batch_id) if d["status"] == "ok"]
        rows = store.embeddings.chunks_of_documents(version, docs)
        pages = iter([[(c, d, raw) for c, d, _, raw in rows if raw is not None]])
    for page in pages:
        if page:
            vecs = stack_vectors([r for _, _, r in page], index.dim)
            index.upsert([c for c, _, _ in page], [d for _, d, _ in page], vecs)
            upserted += len(page)
    log(f"index #{row['id']} of model v{version}: {upserted} chunks upserted again")
    n = index.count()
    store.indexes.mark_synced(
        row["id"], synced_seq=int(row["synced_seq"]), n_chunks=n, corpus_revision=store.ledger.corpus_revision()
    )
    return IndexState(row["id"], version, False, 0, upserted, 0, int(row["synced_seq"]), n)
