"""The embedding pass (`embed_missing`) writes page N-1 and reads page N+1 on an I/O thread while page N is
embedded: every chunk still gets its own vector exactly once, a failure mid-way keeps what was committed, and
the next pass finishes the rest (SQLite, the embedded store, and a real PostgreSQL)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import pytest

from runtime_ops.embedders.registry import load_embedder
from runtime_ops.serving.indexing import EMBED_BATCH, embed_missing
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store.corpus.embeddings import Shard

pytestmark = pytest.mark.slow(seconds=61)  # alone on 2 cores (Dec 2026): started first, see conftest.py

CHUNKS = EMBED_BATCH * 5 + 37  # six pages, the last one short


class Failing:
    """The production embedder, failing on its `fail_on`-th call."""

    def __init__(self, inner, fail_on: int) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.fail_on, self.calls = inner, fail_on, 0
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("the model server went away")
        return self.inner.embed(texts)


def _stored(store: StateStore, version: int) -> dict[int, np.ndarray]:
    return {
        cid: np.frombuffer(raw, dtype="<f4")
        for page in store.embeddings.iter_current_embeddings(version)
        for cid, _, raw in page
    }


@pytest.fixture(params=["sqlite", "postgresql"])
def corpus(request, corpus_templates, tmp_path):  # type: ignore[no-untyped-def]
    """A corpus of CHUNKS chunks and its production lsa model, a copy of one built once per session."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            seeded = corpus_templates.sqlite(tmp_path / "state.db", CHUNKS, (1,))
        else:
            seeded = stack.enter_context(
                corpus_templates.postgres(request.getfixturevalue("postgres_server"), CHUNKS, (1,))
            )
        [version] = seeded.versions
        store = open_store(seeded.url, get_settings(), pipeline="demo", migrate=False)
        yield store, version
        store.engine.dispose()


def test_every_chunk_gets_its_own_vector_once(corpus) -> None:  # type: ignore[no-untyped-def]
    store, version = corpus
    embedder = load_embedder(store.registry, store.artifacts, version)
    seen: list[int] = []
    assert embed_missing(store, version, observe=lambda texts, vecs: seen.append(len(texts))) == CHUNKS
    assert seen == [EMBED_BATCH] * 5 + [37]
    stored = _stored(store, version)
    assert len(stored) == CHUNKS
    # Vectors are stored against the chunk they were computed from (the pages overlap on two threads).
    texts = {cid: text for page in store.documents.iter_current_chunks() for cid, _, text in page}
    ids = sorted(texts)
    expected = embedder.embed([texts[cid] for cid in ids])
    np.testing.assert_allclose(np.vstack([stored[cid] for cid in ids]), expected, rtol=1e-6, atol=1e-7)
    assert embed_missing(store, version) == 0, "nothing is embedded twice"


def test_a_failure_keeps_the_committed_pages_and_the_next_pass_finishes(corpus) -> None:  # type: ignore[no-untyped-def]
    store, version = corpus
    failing = Failing(load_embedder(store.registry, store.artifacts, version), fail_on=4)
    with pytest.raises(RuntimeError, match="went away"):
        embed_missing(store, version, embedder=failing)  # type: ignore[arg-type]
    # Pages 1-3 were embedded; each was committed (the third while the fourth was being embedded).
    assert store.embeddings.embedding_counts(version)["embedded"] == 3 * EMBED_BATCH
    assert embed_missing(store, version) == CHUNKS - 3 * EMBED_BATCH
    assert len(_stored(store, version)) == CHUNKS


def test_a_failed_write_is_raised_and_nothing_after_it_is_written(corpus, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store, version = corpus
    real = store.embeddings.put_embeddings
    calls = {"n": 0}

    def put(model_version, rows):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("database connection lost")
        return real(model_version, rows)

    monkeypatch.setattr(store.embeddings, "put_embeddings", put)
    with pytest.raises(ConnectionError):
        embed_missing(store, version)
    assert store.embeddings.embedding_counts(version)["embedded"] == EMBED_BATCH
    monkeypatch.undo()
    assert embed_missing(store, version) == CHUNKS - EMBED_BATCH


# ------------------------------------------------------------------------- the forked pool (long lsa passes)
@pytest.fixture
def pooled(monkeypatch):  # type: ignore[no-untyped-def]
    """Passes of this test's size run in the pool of forked workers (the real threshold is ~8k chunks)."""
    from runtime_ops.embedders import pool

    monkeypatch.setattr(pool, "MIN_CHUNKS", EMBED_BATCH)
    monkeypatch.setattr(pool, "MAX_WORKERS", 2)
    return pool


class FailsOnText:
    """The production embedder in the pool's children, failing on the page that holds `marker`."""

    cpu_bound_single_thread = True

    def __init__(self, inner, marker: str) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.marker, self.dim = inner, marker, inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.marker in texts:
            raise RuntimeError("the model failed on this page")
        return self.inner.embed(texts)


def test_a_long_lsa_pass_embeds_in_forked_workers_with_the_same_vectors(corpus, pooled) -> None:  # type: ignore[no-untyped-def]
    store, version = corpus
    embedder = load_embedder(store.registry, store.artifacts, version)
    assert pooled.workers_for(embedder, CHUNKS) == 2
    seen: list[int] = []
    assert embed_missing(store, version, observe=lambda texts, vecs: seen.append(len(texts))) == CHUNKS
    assert seen == [EMBED_BATCH] * 5 + [37], "pages are written and observed in order"
    stored = _stored(store, version)
    texts = {cid: text for page in store.documents.iter_current_chunks() for cid, _, text in page}
    ids = sorted(texts)
    np.testing.assert_allclose(
        np.vstack([stored[cid] for cid in ids]), embedder.embed([texts[cid] for cid in ids]), rtol=1e-6, atol=1e-7
    )


def test_a_failure_in_a_worker_keeps_the_pages_before_it(corpus, pooled) -> None:  # type: ignore[no-untyped-def]
    store, version = corpus
    chunks = [c for page in store.documents.iter_current_chunks() for c in page]
    marker = sorted(chunks)[3 * EMBED_BATCH][2]  # the first text of the fourth page
    with pytest.raises(RuntimeError, match="failed on this page"):
        failing = FailsOnText(load_embedder(store.registry, store.artifacts, version), marker)
        embed_missing(store, version, embedder=failing)  # type: ignore[arg-type]
    assert store.embeddings.embedding_counts(version)["embedded"] == 3 * EMBED_BATCH
    assert embed_missing(store, version) == CHUNKS - 3 * EMBED_BATCH


def test_shards_embed_every_chunk_once_between_them_each_resumable(corpus) -> None:  # type: ignore[no-untyped-def]
    """Four shards of one version, as four runs would take them: each embeds only its own chunks, a shard that
    failed mid-way finishes on its next pass, and together they embed the corpus exactly once."""
    store, version = corpus
    shards = [Shard(i, 4) for i in range(4)]
    sizes = [store.embeddings.embedding_counts(version, shard=s)["current_chunks"] for s in shards]
    assert sum(sizes) == CHUNKS and min(sizes) > 0

    first = shards[0]
    assert embed_missing(store, version, shard=first) == sizes[0]
    assert len(_stored(store, version)) == sizes[0] and all(cid % 4 == 0 for cid in _stored(store, version))
    assert embed_missing(store, version, shard=first) == 0, "a finished shard has nothing left"

    failing = Failing(load_embedder(store.registry, store.artifacts, version), fail_on=2)
    with pytest.raises(RuntimeError, match="went away"):
        embed_missing(store, version, embedder=failing, shard=shards[1])  # type: ignore[arg-type]
    partial = store.embeddings.embedding_counts(version, shard=shards[1])["embedded"]
    assert 0 < partial < sizes[1]
    assert embed_missing(store, version, shard=shards[1]) == sizes[1] - partial

    for shard in shards[2:]:
        embed_missing(store, version, shard=shard)
    stored = _stored(store, version)
    assert len(stored) == CHUNKS == store.embeddings.embedding_counts(version)["embedded"]
    done = [store.embeddings.embedding_counts(version, shard=s)["embedded"] for s in shards]
    assert done == sizes
    assert embed_missing(store, version) == 0
    with pytest.raises(ValueError, match="shard"):
        Shard(4, 4)
