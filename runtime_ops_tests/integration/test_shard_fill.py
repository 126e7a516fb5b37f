"""Filling a model version's index in shards (`serving.shards.fill_shard`, one shadow_embeddings partition each),
in process, on SQLite + LanceDB and on PostgreSQL + pgvector: the index is refused until every shard is filled, the
last shard finishes it (the same index a one-process fill builds), a shard that failed half-way resumes, and a plan
of another shard count is refused."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime_ops.embedders.registry import load_embedder
from runtime_ops.locks.factory import locker_for
from runtime_ops.serving.shards import fill_shard
from runtime_ops.serving.vector_index import IndexIncomplete, fill_index, incomplete_backfill
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store.corpus.embeddings import Shard
from runtime_ops.vectors.base import IndexName, VectorStore
from runtime_ops.vectors.factory import open_vector_store
from runtime_ops_tests.support.fencing import set_fenced
from runtime_ops_tests.support.seeded_corpora import CorpusTemplates

pytestmark = pytest.mark.slow(seconds=43)  # alone on 2 cores (Dec 2026): started first, see conftest.py

CHUNKS = 2500
SHARDS = 4


class Failing:
    """An embedder that fails on its `fail_on`-th call."""

    def __init__(self, inner: Any, fail_on: int) -> None:
        self.inner, self.fail_on, self.calls, self.dim = inner, fail_on, 0, inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("the model server went away")
        return np.asarray(self.inner.embed(texts))


@pytest.fixture(params=["sqlite+lance", "postgresql+pgvector"])
def world(
    request: pytest.FixtureRequest, corpus_templates: CorpusTemplates, tmp_path: Path
) -> Iterator[tuple[StateStore, VectorStore, str, int]]:
    """A corpus of CHUNKS chunks with two lsa models (seeds 1 and 2: production and candidate), a copy of one
    built once per session (seeded_corpora.py)."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite+lance":
            corpus = corpus_templates.sqlite(tmp_path / "state.db", CHUNKS, (1, 2))
            url, vector_url = corpus.url, f"lance:///{tmp_path / 'vectors'}"
        else:
            server = request.getfixturevalue("pgvector_server")
            corpus = stack.enter_context(corpus_templates.postgres(server, CHUNKS, (1, 2)))
            url = vector_url = corpus.url
        production, candidate = corpus.versions
        store = open_store(url, get_settings(), pipeline="demo", migrate=False)
        set_fenced(store, "production", production)
        store.registry.set_alias("candidate", candidate, actor="test")
        yield store, open_vector_store(vector_url), url, candidate
        store.engine.dispose()


def _fill(store: StateStore, vectors: VectorStore, url: str, version: int, shard: int, **kw: Any) -> Any:
    locker = locker_for(None, url, get_settings())
    return fill_shard(
        store, vectors, version, Shard(shard, SHARDS), guard=lambda: locker.hold(f"demo:index-fill:v{version}"), **kw
    )


def test_the_index_is_refused_until_every_shard_is_filled_and_the_last_one_finishes_it(world: Any) -> None:
    store, vectors, url, version = world
    done = [_fill(store, vectors, url, version, i) for i in (0, 1, 3)]
    assert [s.finished for s in done] == [False, False, False]
    assert sum(s.upserted for s in done) == sum(s.embedded for s in done) > 0
    assert done[-1].progress.filled == (0, 1, 3) and done[-1].progress.missing == (2,)
    why = incomplete_backfill(store.indexes, vectors, version)
    assert why is not None and "3 filled, 1 to go (partitions 2 of shadow_embeddings)" in why
    with pytest.raises(IndexIncomplete, match="partitions 2 of shadow_embeddings"):
        fill_index(store, vectors, version)
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    assert row is not None and row["status"] == "filling"

    last = _fill(store, vectors, url, version, 2)
    assert last.finished and last.progress.complete
    assert incomplete_backfill(store.indexes, vectors, version) is None
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    assert row is not None and row["status"] == "ready" and row["n_chunks"] == CHUNKS
    counts = store.embeddings.embedding_counts(version)
    assert counts == {"current_chunks": CHUNKS, "embedded": CHUNKS}
    # The same index a one-process fill builds: every chunk once, with its own stored vector.
    index = vectors.open(IndexName("demo", version), int(row["dim"]))
    assert index.count() == CHUNKS
    stored = {c: v for page in store.embeddings.iter_current_vectors(version) for c, _, v in page}
    probe_id, probe = next(iter(stored.items()))
    [hits] = index.search(np.frombuffer(probe, dtype="<f4")[None, :], 3)
    assert hits[0].chunk_id == probe_id
    # The model's centroid (what later batches' drift is measured from) is the mean of every vector, summed over
    # the shards' partial sums.
    total, count = store.retraining.latest_centroid(version)  # type: ignore[misc]
    every = np.vstack([np.frombuffer(v, dtype="<f4") for v in stored.values()]).astype(np.float64)
    assert count == CHUNKS
    np.testing.assert_allclose(np.frombuffer(total, dtype="<f8"), every.sum(axis=0), rtol=1e-6, atol=1e-6)
    # A partition run again (a re-executed backfill) finds the index complete and does nothing.
    again = _fill(store, vectors, url, version, 1)
    assert again.already_ready and again.embedded == again.upserted == 0


def test_a_shard_that_failed_half_way_resumes_and_embeds_only_the_rest(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors, url, version = world
    # Pages of 100: the shard (~625 chunks) is several pages, each committed before the next is embedded.
    monkeypatch.setattr("runtime_ops.serving.indexing.EMBED_BATCH", 100)
    embedder = load_embedder(store.registry, store.artifacts, version)
    shard = Shard(0, SHARDS)
    total = store.embeddings.embedding_counts(version, shard=shard)["current_chunks"]
    with pytest.raises(RuntimeError, match="went away"):
        _fill(store, vectors, url, version, 0, embedder=Failing(embedder, fail_on=4))
    kept = store.embeddings.embedding_counts(version, shard=shard)["embedded"]
    assert 0 < kept < total
    assert store.indexes.shard_progress(int(_row(store, vectors, version)["id"])).filled == ()
    resumed = _fill(store, vectors, url, version, 0, embedder=embedder)
    assert resumed.embedded == total - kept and resumed.upserted == total
    assert store.embeddings.embedding_counts(version, shard=shard) == {"current_chunks": total, "embedded": total}
    assert resumed.progress.filled == (0,) and not resumed.finished


def test_a_plan_of_another_shard_count_is_refused(world: Any) -> None:
    store, vectors, url, version = world
    _fill(store, vectors, url, version, 0)
    locker = locker_for(None, url, get_settings())
    with pytest.raises(ValueError, match="already being filled in 4 shards, not 8"):
        fill_shard(store, vectors, version, Shard(0, 8), guard=lambda: locker.hold("demo:index-fill"))


def _row(store: StateStore, vectors: VectorStore, version: int) -> dict[str, Any]:
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    assert row is not None
    return row


def test_documents_that_change_during_the_backfill_are_in_the_finished_index(world: Any) -> None:
    from runtime_ops.store import NewObject

    store, vectors, url, version = world
    _fill(store, vectors, url, version, 0)
    _fill(store, vectors, url, version, 1)
    # Mid-backfill: a new document whose chunks fall in shards already filled and in shards still to come, and a
    # document whose chunks shard 0 already indexed is deleted at the landing.
    batch = store.ledger.record_batch("test://", [NewObject("late.md", "v1", 100, None)])
    assert batch is not None
    [doc] = store.documents.batch_documents(batch["id"])
    store.documents.store_chunks(doc["id"], [f"late chunk {i} about pgvector shards" for i in range(6)])
    first_page = next(store.documents.iter_current_chunks(batch_size=50))
    gone_key = next(key for cid, key, _ in first_page if cid % SHARDS == 0 and key != "late.md")
    gone_id = store.documents.remove_key(gone_key, reason="deleted at the landing")
    assert gone_id is not None
    _fill(store, vectors, url, version, 2)
    last = _fill(store, vectors, url, version, 3)
    assert last.finished
    current = store.embeddings.embedding_counts(version)
    row = _row(store, vectors, version)
    index = vectors.open(IndexName("demo", version), int(row["dim"]))
    # Every current chunk exactly once: the late document's chunks in, the deleted document's out.
    assert row["n_chunks"] == index.count() == current["current_chunks"] == current["embedded"]
    late_chunks = [c for c, _, _, _ in store.embeddings.chunks_of_documents(version, [int(doc["id"])])]
    assert len(late_chunks) == 6 and index.missing(late_chunks) == []
    gone_chunks = [c for c, key, _ in first_page if key == gone_key]
    assert index.missing(gone_chunks) == gone_chunks
