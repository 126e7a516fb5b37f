"""Embedding the corpus and building the retrieval index for one model version (glue over the store).

Shared by the serving assets and the promotion saga, so an index built during a promotion is the one the
assets then find up to date.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from runtime_ops.documents.chunk_profiles import ensure_model_chunks
from runtime_ops.embedders.base import TextEmbedder
from runtime_ops.embedders.pool import EmbedPool, Pending, workers_for
from runtime_ops.embedders.registry import load_embedder
from runtime_ops.faults import failpoint
from runtime_ops.policies.drift import BatchDrift, Centroid
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.embeddings import Shard
from runtime_ops.store.corpus.ledger import Ledger
from runtime_ops.store.operations.retraining import Retraining

# Chunks per page: one query, one embed call and one commit each (the unit a killed run resumes from). Pages of
# 1,024 rather than 256 cut the per-page costs (statements, commits) of an lsa pass by ~10%.
EMBED_BATCH = 1024
PROGRESS_EVERY_S = 5.0


def embed_missing(
    store: StateStore,
    version: int,
    log: Callable[[str], None] = lambda _: None,
    *,
    embedder: TextEmbedder | None = None,
    observe: Callable[[list[str], np.ndarray], None] | None = None,
    counts: dict[str, int] | None = None,
    shard: Shard | None = None,
) -> int:
    """Embed every current chunk that has no vector for `version` (of `shard` only: separate runs can each take
    a shard of the same version side by side); returns how many were written.

    Each batch is committed as it is written and a chunk already embedded is never written again, so a run
    killed half-way resumes where it stopped and embeds nothing twice. `observe(texts, vectors)` sees each
    batch (the drift signals of document_embeddings).

    The store's reads and writes run on one I/O thread while the model embeds: page N+1 is fetched and page
    N-1 committed while page N is embedded, so the database round trips (whose driver releases the GIL) overlap
    the model instead of adding to it. At most one page waits to be written; a failed write is raised here. A
    long pass of a single-threaded model embeds a few pages at once in forked processes (`EmbedPool`), pages
    still written in order.
    """
    # The version reads its own profile's chunks: any current document not cut for it yet is cut first.
    ensure_model_chunks(store.documents, store.profiles, version, log=log)
    embedder = embedder or load_embedder(store.registry, store.artifacts, version)
    counts = counts or store.embeddings.embedding_counts(version, shard=shard)
    todo = counts["current_chunks"] - counts["embedded"]
    written = 0
    logged = time.monotonic()

    def fetch(after: int) -> list[tuple[int, str]]:
        # Keyset paging: each page starts after the last chunk of the one before, so a pass over N chunks is
        # linear, not a re-scan of every embedded chunk per page.
        return store.embeddings.chunks_missing_embeddings(version, EMBED_BATCH, after=after, shard=shard)

    def committed(write: Future[int]) -> None:
        nonlocal written, logged
        written += write.result()
        # Progress at most every few seconds: each log line is a committed event in Dagster's event log.
        if time.monotonic() - logged >= PROGRESS_EVERY_S:
            log(f"embedded {written}/{todo} chunks with model v{version}")
            logged = time.monotonic()
        failpoint("embeddings.batch")  # after the batch is committed: a fault test may kill or slow us here

    # The pool forks (for a long pass of a single-threaded model) before the I/O thread starts.
    with (
        EmbedPool(embedder, workers_for(embedder, todo)) as pool,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-io") as io,
    ):
        page = io.submit(fetch, 0)
        inflight: deque[tuple[list[tuple[int, str]], Pending]] = deque()
        write: Future[int] | None = None
        try:
            while True:
                # Up to `window` pages are being embedded (one in this process, more with a pool).
                while len(inflight) < pool.window and (batch := page.result()):
                    page = io.submit(fetch, batch[-1][0])
                    inflight.append((batch, pool.submit([text for _, text in batch])))
                if not inflight:
                    break
                batch, pending = inflight.popleft()
                vectors = pending.result()
                if write is not None:
                    committed(write)
                write = io.submit(
                    store.embeddings.put_embeddings, version, list(zip([c for c, _ in batch], vectors, strict=True))
                )
                if observe is not None:
                    observe([text for _, text in batch], vectors)
            if write is not None:
                committed(write)
                write = None
        finally:
            if write is not None and not write.done():
                # Leaving on an error: the page being written still commits (it is whole and correct); wait for it
                # so the caller never sees the store busy behind its back.
                with contextlib.suppress(Exception):
                    write.result()
    if written:
        log(f"embedded {written}/{todo} chunks with model v{version}")
    return written


@dataclass(frozen=True)
class DriftSignal:
    model_version: int
    corpus_revision: int
    chunks: int
    embedding_shift: float | None  # None: the model's first vectors (nothing to compare against)
    oov_rate: float | None


def record_drift(
    ledger: Ledger,
    retraining: Retraining,
    version: int,
    drift: BatchDrift,
    *,
    first: bool,
    run_id: str | None = None,
) -> DriftSignal | None:
    """Record the drift signal of the chunks `drift` observed (None when it observed none): their embedding shift
    from the model's running centroid before them and their OOV rate. `first`: they are every vector of the model
    (a fill), which sets the centroid and signals nothing."""
    if not drift.chunks or drift.batch is None:
        return None
    revision = ledger.corpus_revision()
    stored = None if first else retraining.latest_centroid(version)
    before = Centroid.from_bytes(*stored) if stored is not None else Centroid.empty(len(drift.batch.sum))
    shift = drift.shift_from(before) if before.count else None
    oov = None if first else drift.oov_rate
    after = before.plus(drift.batch)
    retraining.record_drift_signal(
        model_version=version,
        corpus_revision=revision,
        chunks=drift.chunks,
        embedding_shift=shift,
        oov_rate=oov,
        centroid_sum=after.to_bytes(),
        centroid_count=after.count,
        run_id=run_id,
    )
    return DriftSignal(version, revision, drift.chunks, shift, oov)
