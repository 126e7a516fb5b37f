"""The vector-scale benchmark's child processes (`python -m bench._vector_child setup|timed ...`).

setup STATE_URL VECTOR_URL N: the text path (up to TEXT_MAX real chunks seeded, an lsa production model trained
    on a 10k sample, every chunk embedded and its index filled through `fill_index`), then N - TEXT_MAX synthetic
    rows (a real vector plus noise: the corpus's own distribution) upserted into the same index, and the ANN
    structure built (`optimize`). Untimed.
timed STATE_URL VECTOR_URL: in a fresh interpreter, (1) make NEW_DOCS new documents searchable, the way the
    serving assets do (recorded in a landing batch, parsed, chunked: the change feed; then `sync_index`: embed
    their chunks, upsert, advance), timed, and the process's peak RSS right after; (2) QUERIES searches near the
    data through the backend: p50/p99 and recall@10 against an exact search over every vector; (3) the same
    query texts through `POST /api/search` of a real ops API (uvicorn on loopback, an API key) against the
    backend's own query of the same texts (embedding the query included on both sides): each text once through
    both untimed, then timed in alternating order (the second query of a text finds its index pages cached).

Prints one `RESULT {json}` line.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from bench._synth import PIPELINE, _texts, make_production, seed_corpus

TEXT_MAX = 100_000
NEW_DOCS = 100
QUERIES = 200
K = 10


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def setup(state_url: str, vector_url: str, n: int) -> dict[str, Any]:
    from runtime_ops.serving.vector_index import fill_index
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops.vectors.base import IndexName
    from runtime_ops.vectors.factory import open_vector_store
    from runtime_ops_tests.support.fencing import set_fenced

    t0 = time.perf_counter()
    text = min(n, TEXT_MAX)
    seeded = seed_corpus(state_url, text)
    prod = make_production(state_url, embed=True, train_sample=10_000)
    store = open_store(state_url, get_settings(), pipeline=PIPELINE, migrate=False)
    vectors = open_vector_store(vector_url)
    version = int(prod["production_version"])
    t1 = time.perf_counter()
    # Synthetic rows first, into the fresh table, so that the fill's optimize() builds the ANN structure once over
    # every row (inserting 900k rows into an existing HNSW graph runs at ~400 rows/s).
    index = vectors.open(IndexName(PIPELINE, version), int(prod["dim"]), create=True)
    synthetic = n - text
    if synthetic > 0:
        pages = store.embeddings.iter_current_vectors(version)
        real = np.vstack([np.frombuffer(raw, dtype="<f4") for page in pages for *_, raw in page]).reshape(-1, index.dim)
        rng = np.random.default_rng(5)
        for start in range(0, synthetic, 50_000):
            m = min(50_000, synthetic - start)
            noise = rng.normal(scale=0.35 / np.sqrt(index.dim), size=(m, index.dim))
            rows = real[rng.integers(0, len(real), m)] + noise
            rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
            ids = list(range(10_000_000 + start, 10_000_000 + start + m))  # beyond every real chunk id
            index.upsert(ids, [5_000_000 + i // 8 for i in ids], rows.astype(np.float32))
        del real
    t2 = time.perf_counter()
    state = fill_index(store, vectors, version)  # the real rows, then optimize(): the ANN structure, once
    set_fenced(store, "retrieval_index", state.index_id, actor="bench")
    t3 = time.perf_counter()
    rows_now = index.count()
    store.indexes.mark_synced(
        state.index_id, synced_seq=state.synced_seq, n_chunks=rows_now, corpus_revision=store.ledger.corpus_revision()
    )
    return {
        "text_chunks": seeded.chunks,
        "documents": seeded.documents,
        "synthetic_rows": max(0, synthetic),
        "index_rows": rows_now,
        "dim": index.dim,
        "ann_index": index.has_ann_index(),
        "seed_train_embed_s": round(t1 - t0, 1),
        "synthetic_upsert_s": round(t2 - t1, 1),
        "fill_and_ann_build_s": round(t3 - t2, 1),
        "production": prod,
    }


def _land(store: Any) -> tuple[list[str], list[int]]:
    """NEW_DOCS documents through the ledger and the document store (as ingest_job writes them)."""
    import hashlib
    from datetime import UTC, datetime

    from runtime_ops.store.corpus.ledger import NewObject

    docs = []
    for i, (_, texts, title) in enumerate(_texts(NEW_DOCS * 10, seed=99)):
        if i == NEW_DOCS:
            break
        docs.append((f"new/doc-{i:03d}.md", texts, title))
    now = datetime.now(UTC)
    batch = store.ledger.record_batch(
        "bench://new", [NewObject(k, "v1", sum(len(t) for t in texts), now) for k, texts, _ in docs]
    )
    assert batch is not None
    by_key = {d["key"]: int(d["id"]) for d in store.documents.batch_documents(batch["id"])}
    first_texts: list[str] = []
    for key, texts, title in docs:
        body = "\n\n".join(texts)
        doc_id = by_key[key]
        store.documents.store_parsed(
            doc_id, content_hash=hashlib.sha256(body.encode()).hexdigest(), fmt="markdown", title=title, text=body
        )
        assert store.documents.store_chunks(doc_id, texts) == "ok"
        first_texts.append(texts[0])
    store.ledger.mark_batch(batch["id"], "ingested", run_id="bench")
    return first_texts, list(by_key.values())


def timed(state_url: str, vector_url: str) -> dict[str, Any]:
    from runtime_ops.embedders.registry import load_embedder
    from runtime_ops.serving.vector_index import sync_index
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops.vectors.base import IndexName
    from runtime_ops.vectors.factory import open_vector_store

    store = open_store(state_url, get_settings(), pipeline=PIPELINE, migrate=False)
    vectors = open_vector_store(vector_url)
    version = int(store.registry.alias("production") or 0)
    embedder = load_embedder(store.registry, store.artifacts, version)
    index = vectors.open(IndexName(PIPELINE, version), embedder.dim)
    t_load = time.perf_counter()
    embedder.embed(["warm up"])  # the model's first call builds its analyzer: once per run, whatever the corpus
    model_warm_s = time.perf_counter() - t_load
    rss_before = _rss_mb()  # indexing is measured before any search loads the ANN structure

    # (1) 100 new documents: landed and chunked, then searchable.
    t0 = time.perf_counter()
    probes, doc_ids = _land(store)
    t1 = time.perf_counter()
    state = sync_index(store, vectors, version, embedder=embedder)
    t2 = time.perf_counter()
    rss_after = _rss_mb()
    t_probe = time.perf_counter()
    found = index.search(embedder.embed(probes[:20]), K)
    first_search_s = time.perf_counter() - t_probe
    new_chunks = {cid for cid, _, _, _ in store.embeddings.chunks_of_documents(version, doc_ids)}
    searchable = sum(any(h.chunk_id in new_chunks for h in hits) for hits in found) / len(found)
    index.search(embedder.embed(["warm up"]), K)  # first-query caches, before the latency measurement

    # (2) search near the data: p50/p99 and recall@10 against exact.
    all_ids, all_vecs = _every_vector(index, store, version)
    rng = np.random.default_rng(17)
    pick = rng.integers(0, len(all_vecs), QUERIES)
    queries = all_vecs[pick] + rng.normal(scale=0.3 / np.sqrt(index.dim), size=(QUERIES, index.dim))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    latencies, got = [], []
    for q in queries:
        s = time.perf_counter()
        got.append([h.chunk_id for h in index.search(q[None, :], K)[0]])
        latencies.append(time.perf_counter() - s)
    exact = _exact_top_k(all_vecs, all_ids, queries)
    recall = float(np.mean([len(set(g) & set(e)) / K for g, e in zip(got, exact, strict=True)]))
    del all_vecs

    # (3) the query API against the backend's own query, both from query text. Every text goes through both once
    # (untimed: the index pages a query touches are then cached for either side), then both are timed per text
    # in alternating order, so neither side is always the one that finds the other's pages in the cache.
    texts = [t for _, _, t in store.documents.current_chunks()[:: max(1, store.documents.current_chunk_count() // 100)]]
    texts = [" ".join(t.split()[:12]) for t in texts][:100]

    def own_query(t: str) -> float:
        s = time.perf_counter()
        index.search(embedder.embed([t]), K)
        return time.perf_counter() - s

    api, own = [], []
    with _api_client(store) as api_query:
        for t in texts:
            api_query(t)
            own_query(t)
        for i, t in enumerate(texts):
            if i % 2:
                own.append(own_query(t))
                api.append(api_query(t))
            else:
                api.append(api_query(t))
                own.append(own_query(t))
    return {
        "searchable_s": round(t2 - t0, 4),
        "land_s": round(t1 - t0, 4),
        "sync_s": round(t2 - t1, 4),
        "sync": {"embedded": state.embedded, "upserted": state.upserted, "removed": state.removed},
        "searchable_share": searchable,
        "first_searches_s": round(first_search_s, 4),
        "model_warm_s": round(model_warm_s, 3),
        "rss_before_mb": round(rss_before, 1),
        "peak_rss_after_sync_mb": round(rss_after, 1),
        "search_p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 3),
        "search_p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 3),
        "recall_at_10": round(recall, 4),
        "index_rows": len(all_ids),
        "ann_index": index.has_ann_index(),
        "api_p50_ms": round(float(np.percentile(api, 50)) * 1000, 3),
        "api_p99_ms": round(float(np.percentile(api, 99)) * 1000, 3),
        "own_p50_ms": round(float(np.percentile(own, 50)) * 1000, 3),
        "own_p99_ms": round(float(np.percentile(own, 99)) * 1000, 3),
    }


def _every_vector(index: Any, store: Any, version: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row of the index (ids, vectors), read from the backend itself."""
    from runtime_ops.vectors.lance import LanceVectorIndex

    if isinstance(index, LanceVectorIndex):
        table = index._table.to_arrow()  # pyright: ignore[reportPrivateUsage]
        ids = table.column("chunk_id").to_numpy()
        vecs = np.asarray(table.column("vector").combine_chunks().flatten().to_numpy()).reshape(-1, index.dim)
        return ids, vecs.astype(np.float32)
    with index._store.raw() as cur:  # pyright: ignore[reportAttributeAccessIssue]
        tables = (index._qualified, index._delta)  # pyright: ignore[reportAttributeAccessIssue]
        rows = []
        for table in tables:  # the graph's table and the delta beside it
            cur.execute(f"SELECT chunk_id, embedding::text FROM {table}")
            rows += cur.fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vecs = np.array([json.loads(r[1]) for r in rows], dtype=np.float32)
    return ids, vecs


def _exact_top_k(vecs: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> list[list[int]]:
    norms = np.linalg.norm(vecs, axis=1)
    norms[norms == 0] = np.inf
    scores = np.zeros((len(queries), 0), dtype=np.float32)
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(vecs), 200_000):
        part = (queries @ vecs[start : start + 200_000].T) / norms[start : start + 200_000]
        scores = np.hstack([scores, part])
        best_ids = np.hstack([best_ids, np.broadcast_to(ids[start : start + 200_000], part.shape)])
        keep = np.argsort(-scores, axis=1)[:, :K]
        scores = np.take_along_axis(scores, keep, axis=1)
        best_ids = np.take_along_axis(best_ids, keep, axis=1)
    return [row.tolist() for row in best_ids]


@contextlib.contextmanager
def _api_client(store: Any) -> Iterator[Callable[[str], float]]:
    """A real ops API (uvicorn on loopback, in a thread) and a keep-alive client: yields `query(text)`, which
    sends one `POST /api/search` and returns its seconds."""
    import threading

    import httpx
    import uvicorn

    from runtime_ops.api.app import create_app
    from runtime_ops.settings import get_settings
    from runtime_ops_tests.support.servers import free_port

    key = store.api_keys.create("bench", ["search"]).key
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(get_settings()), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(200):
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            headers = {"Authorization": f"Bearer {key}"}

            def query(text: str) -> float:
                s = time.perf_counter()
                resp = client.post("/api/search", json={"query": text, "k": K}, headers=headers)
                took = time.perf_counter() - s
                if resp.status_code != 200:
                    raise RuntimeError(f"/api/search answered {resp.status_code}: {resp.text[:300]}")
                return took

            yield query
    finally:
        server.should_exit = True
        thread.join(timeout=10)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    result = setup(args[0], args[1], int(args[2])) if cmd == "setup" else timed(args[0], args[1])
    print("RESULT " + json.dumps(result), flush=True)
