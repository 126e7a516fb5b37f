"""Every vector store backend keeps the promises of `runtime_ops.vectors.base`: the embedded one (LanceDB, a
folder) and pgvector on a real PostgreSQL 16 with the extension (`pgvector_url`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from runtime_ops.vectors.base import IndexMissing, IndexName, VectorStore, VectorStoreError
from runtime_ops.vectors.factory import open_vector_store

DIM = 32


def unit_rows(n: int, dim: int = DIM, seed: int = 0, clusters: int = 40) -> np.ndarray:
    """Normalised vectors around `clusters` centres (as embeddings are), float32."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    rows = centres[rng.integers(0, clusters, size=n)] + 0.35 * rng.normal(size=(n, dim))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


@pytest.fixture(params=["lance", "pgvector"])
def store_url(request, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    if request.param == "lance":
        return f"lance://{tmp_path / 'vectors'}"
    return request.getfixturevalue("pgvector_url")


@pytest.fixture
def store(store_url: str):  # type: ignore[no-untyped-def]
    vs = open_vector_store(store_url)
    yield vs
    vs.close()


def test_upsert_search_replace_and_delete(store: VectorStore) -> None:
    name = IndexName("alpha", 3)
    index = store.open(name, DIM, create=True)
    rows = unit_rows(500)
    ids = list(range(1, 501))
    docs = [i // 10 for i in ids]  # ten chunks per document
    assert index.upsert(ids, docs, rows) == 500
    assert index.count() == 500
    [hits] = index.search(rows[41:42], 5)
    assert hits[0].chunk_id == 42 and hits[0].document_id == 4 and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    # The same ids again replace their rows (no duplicates).
    moved = unit_rows(10, seed=7)
    index.upsert(ids[:10], docs[:10], moved)
    assert index.count() == 500
    [hits] = index.search(moved[3:4], 1)
    assert hits[0].chunk_id == 4 and hits[0].score == pytest.approx(1.0, abs=1e-4)

    assert index.delete_documents([0, 1]) == 19  # chunk ids 1..19 belong to documents 0 and 1
    assert index.count() == 481
    assert index.missing([5, 25, 600]) == [5, 600]
    assert index.delete_chunks([25, 26, 9999]) == 2
    assert all(h.chunk_id not in (25, 26) and h.document_id > 1 for h in index.search(rows[:30], 10)[0])


def test_indexes_are_independent_listed_and_dropped(store: VectorStore) -> None:
    a, b = IndexName("alpha", 1), IndexName("beta", 1)
    store.open(a, DIM, create=True).upsert([1], [1], unit_rows(1))
    store.open(b, 16, create=True).upsert([1, 2], [1, 1], unit_rows(2, dim=16))
    assert store.open(a, DIM).count() == 1 and store.open(b, 16).count() == 2
    assert store.names() == [a, b] and store.names("beta") == [b]
    with pytest.raises(VectorStoreError, match="16"):
        store.open(b, DIM)  # another dimension than the index has
    with pytest.raises(IndexMissing):
        store.open(IndexName("alpha", 2), DIM)
    assert store.drop(a) is True and store.drop(a) is False
    assert store.names() == [b]
    with pytest.raises(IndexMissing):
        store.open(a, DIM)


def test_bad_vectors_are_refused_before_anything_is_written(store: VectorStore) -> None:
    index = store.open(IndexName("alpha", 1), DIM, create=True)
    index.upsert([1, 2], [1, 1], unit_rows(2))
    with pytest.raises(ValueError, match="dimensions"):
        index.upsert([3], [1], np.ones((1, DIM + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        index.upsert([3, 4], [1, 1], np.array([[np.nan] * DIM, [0.1] * DIM], dtype=np.float32))
    with pytest.raises(ValueError, match="2 ids"):
        index.upsert([3, 4], [1], unit_rows(2))
    assert index.count() == 2


def test_zero_vectors_are_stored_but_never_returned(store: VectorStore) -> None:
    index = store.open(IndexName("alpha", 1), DIM, create=True)
    rows = unit_rows(20)
    rows[5] = 0.0
    index.upsert(list(range(1, 21)), [1] * 20, rows)
    assert index.count() == 20
    hits = index.search(rows[:1], 20)[0]
    assert 6 not in {h.chunk_id for h in hits} and all(np.isfinite(h.score) for h in hits)


def test_recall_at_10_against_exact_search(store: VectorStore) -> None:
    """Below the backends' ANN thresholds (20k rows) a search is exact, even for queries far from the data."""
    index = store.open(IndexName("alpha", 1), DIM, create=True)
    rows = unit_rows(15_000, seed=3)
    for start in range(0, len(rows), 5000):
        ids = list(range(start + 1, start + 5001))
        index.upsert(ids, [i // 7 for i in ids], rows[start : start + 5000])
    index.optimize()
    queries = unit_rows(200, seed=4)
    exact = np.argsort(-(queries @ rows.T), axis=1)[:, :10] + 1
    found = index.search(queries, 10)
    recall = np.mean(
        [len({h.chunk_id for h in got} & set(want.tolist())) / 10 for got, want in zip(found, exact, strict=True)]
    )
    assert recall >= 0.95, recall
    assert not index.has_ann_index()


def test_recall_at_10_through_the_ann_index(store: VectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past their exact-search size both backends answer from an ANN index (IVF-HNSW / HNSW): queries near the
    data, as a user's questions are near their corpus, keep recall@10 >= 0.95 against exact search."""
    from runtime_ops.vectors import lance, pgvector

    monkeypatch.setattr(lance, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(pgvector, "EXACT_MAX_ROWS", 1000)
    index = store.open(IndexName("alpha", 1), DIM, create=True)
    rows = unit_rows(20_000, seed=3)
    index.upsert(list(range(1, 20_001)), [i // 7 for i in range(1, 20_001)], rows)
    index.optimize()
    noise = np.random.default_rng(5).normal(scale=0.1, size=(200, DIM)).astype(np.float32)
    queries = rows[np.random.default_rng(6).integers(0, len(rows), 200)] + noise
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = np.argsort(-(queries @ rows.T), axis=1)[:, :10] + 1
    found = index.search(queries, 10)
    recall = np.mean(
        [len({h.chunk_id for h in got} & set(want.tolist())) / 10 for got, want in zip(found, exact, strict=True)]
    )
    assert recall >= 0.95, recall
    # The answers came from the ANN index, which optimize() built.
    if isinstance(index, lance.LanceVectorIndex):
        assert index.has_ann_index()
    else:
        assert isinstance(index, pgvector.PgVectorIndex) and index.has_ann_index()


def test_pgvector_calibrates_ef_search_on_its_own_data_and_searches_with_it(
    pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HNSW graph's ef_search is the smallest of the ladder that reaches the recall target on queries near
    its own rows (measured against exact search when the graph is built); searches use it, a graph grown past
    RECALIBRATE_GROWTH is calibrated again, and dropping the index forgets it."""
    from runtime_ops.vectors import pgvector, pgvector_store

    monkeypatch.setattr(pgvector, "EXACT_MAX_ROWS", 1000)
    store = open_vector_store(pgvector_url)
    assert isinstance(store, pgvector_store.PgVectorStore)
    try:
        index = store.open(IndexName("tuned", 1), DIM, create=True)
        assert isinstance(index, pgvector.PgVectorIndex)
        rows = unit_rows(6000, seed=11)
        index.upsert(list(range(1, 6001)), [i // 7 for i in range(1, 6001)], rows)
        assert index.tuning() is None
        index.optimize()
        tuned = index.tuning()
        assert tuned is not None and tuned["ef_search"] in pgvector.EF_LADDER and tuned["rows"] == 6000
        assert tuned["recall"] >= pgvector.RECALL_TARGET or tuned["ef_search"] == pgvector.EF_LADDER[-1]
        with store.raw() as cur:  # what a search arms
            assert index._plan(cur) == (6000, tuned["ef_search"])  # pyright: ignore[reportPrivateUsage]

        # A stricter target than the ladder's first step can meet picks a larger ef_search.
        strict = index.calibrate(target=1.01)
        assert strict["ef_search"] == pgvector.EF_LADDER[-1] and strict["recall"] <= 1.0

        more = unit_rows(2000, seed=12)
        index.upsert(list(range(6001, 8001)), [i // 7 for i in range(6001, 8001)], more)
        index.optimize()  # folds the delta into the graph: 8000 rows, a third more than calibrated
        again = index.tuning()
        assert again is not None and again["rows"] == 8000 and again["calibrated_at"] > tuned["calibrated_at"]
        assert store.drop(IndexName("tuned", 1))
        with store.raw() as cur:
            cur.execute(f"SELECT count(*) FROM {pgvector.TUNING}")
            assert cur.fetchone()[0] == 0
    finally:
        store.close()


def test_writes_after_the_ann_index_is_built_are_searchable_at_once(
    store: VectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the ANN threshold, upserts, replacements and deletes show in the next search without an optimize()
    (pgvector keeps them in a delta table beside the graph until optimize() folds them in)."""
    from runtime_ops.vectors import lance, pgvector

    monkeypatch.setattr(lance, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(pgvector, "EXACT_MAX_ROWS", 1000)
    index = store.open(IndexName("alpha", 1), DIM, create=True)
    rows = unit_rows(3000, seed=8)
    index.upsert(list(range(1, 3001)), [i // 7 for i in range(1, 3001)], rows)
    index.optimize()
    assert index.has_ann_index()

    fresh = unit_rows(3, seed=9)
    index.upsert([5001, 5002, 5003], [900, 900, 901], fresh)  # new rows
    index.upsert([7], [1], fresh[2:3])  # an existing row replaced by the third new vector
    assert index.count() == 3003
    for i, q in enumerate(fresh[:2]):
        assert index.search(q, 1)[0][0].chunk_id == 5001 + i
    assert {h.chunk_id for h in index.search(fresh[2], 2)[0]} == {5003, 7}
    assert index.missing([5001, 7, 9999]) == [9999]
    assert index.delete_documents([900]) == 2 and index.count() == 3001
    assert all(h.chunk_id not in (5001, 5002) for h in index.search(fresh[0], 10)[0])
    index.optimize()  # folds pending writes into the ANN structure; nothing changes for a reader
    assert index.count() == 3001 and {h.chunk_id for h in index.search(fresh[2], 2)[0]} == {5003, 7}
    assert store.names("alpha") == [IndexName("alpha", 1)]
    assert store.drop(IndexName("alpha", 1)) and store.names() == []


_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from runtime_ops.vectors.base import IndexName
    from runtime_ops.vectors.factory import open_vector_store
    url, first, n, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    index = open_vector_store(url).open(IndexName("alpha", 1), dim)
    rows = np.random.default_rng(first).normal(size=(n, dim)).astype(np.float32)
    ids = list(range(first, first + n))
    print("writing", flush=True)
    index.upsert(ids, [5] * n, rows)
    print("written", flush=True)
    """
)


def test_a_writer_killed_mid_upsert_leaves_all_or_nothing_and_the_retry_finishes(store_url: str) -> None:
    store = open_vector_store(store_url)
    index = store.open(IndexName("alpha", 1), DIM, create=True)
    index.upsert(list(range(1, 101)), [1] * 100, unit_rows(100))
    n = 200_000
    # Kills after shorter and shorter delays until one lands before the upsert commits (a fast machine commits
    # 200k rows within the first delay); every outcome must be all or nothing.
    before, first, killed_before_commit = 100, 1_000_001, None
    for delay in (0.3, 0.15, 0.05, 0.0):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, store_url, str(first), str(n), str(DIM)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        time.sleep(delay)  # inside the upsert call
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        after_kill = open_vector_store(store_url).open(IndexName("alpha", 1), DIM).count()
        assert after_kill in (before, before + n), (delay, after_kill)
        if after_kill == before:
            killed_before_commit = first
            break
        before, first = after_kill, first + n
    assert killed_before_commit is not None, "every kill landed after the commit: make the batch bigger"
    # The retry of the same rows completes, and the index is usable.
    rows = np.random.default_rng(first).normal(size=(n, DIM)).astype(np.float32)
    index = open_vector_store(store_url).open(IndexName("alpha", 1), DIM)
    index.upsert(list(range(first, first + n)), [5] * n, rows)
    assert index.count() == before + n
    assert index.missing([first, first + n - 1, 1]) == []
    store.close()
