"""Synthetic corpora for the model benchmarks: a SQLite state store seeded in bulk, and a production model.

Seeding goes straight through SQLAlchemy Core on the store's own tables (one landing batch marked ingested,
documents with status `ok`, their chunks), so building a 300k-chunk corpus takes seconds instead of the
ingest job's hours; it is always untimed setup. Texts are 60-120 words drawn from a 30,000-word invented
vocabulary with a Zipf-like frequency (a few words very common, most rare, as in prose) mixed with each
document's own dozen topic words (~15% of a chunk's words), so TF-IDF + SVD and retrieval have real work to do.
Documents have 5-10 chunks; the first chunk of each starts with a markdown heading naming its topic.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

PIPELINE = "demo"  # the built-in pipeline (runtime_ops/defs/demo): its spec is the one the assets use
VOCABULARY = 30_000
TOPIC_WORDS = 12
TOPIC_SHARE = 0.15
_SYLLABLES = [
    "ka", "zu", "mo", "ri", "te", "vo", "lan", "qui", "so", "ne", "dra", "pel", "xi", "bor", "fa", "gu",
    "sta", "mer", "lio", "pra", "dun", "kel", "ost", "wi", "ny", "tro", "bel", "cor", "har", "min",
]  # fmt: skip


def vocabulary(n: int = VOCABULARY, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def _texts(n_chunks: int, seed: int) -> Iterator[tuple[int, list[str], str]]:
    """(document index, chunk texts, title) until `n_chunks` chunks have been produced."""
    vocab = np.array(vocabulary(), dtype=object)
    weights = 1.0 / (np.arange(len(vocab)) + 3.0)
    weights /= weights.sum()
    rng = np.random.default_rng(seed)
    produced = doc = 0
    while produced < n_chunks:
        # A page of documents at a time: bounded memory whatever n_chunks is.
        sizes = rng.integers(5, 11, size=500)
        lengths = [rng.integers(60, 121, size=int(s)) for s in sizes]
        total = int(sum(int(x.sum()) for x in lengths))
        words = rng.choice(len(vocab), size=total, p=weights)
        topics = rng.integers(0, len(vocab), size=(len(sizes), TOPIC_WORDS))
        doc_of_word = np.repeat(np.arange(len(sizes)), [int(x.sum()) for x in lengths])
        mask = rng.random(total) < TOPIC_SHARE
        words[mask] = topics[doc_of_word[mask], rng.integers(0, TOPIC_WORDS, size=int(mask.sum()))]
        pos = 0
        for d, chunk_lengths in enumerate(lengths):
            title = f"{str(vocab[topics[d, 0]]).capitalize()} {vocab[topics[d, 1]]} guide"
            texts = []
            for length in chunk_lengths:
                texts.append(" ".join(vocab[words[pos : pos + int(length)]]))
                pos += int(length)
                if produced + len(texts) >= n_chunks:
                    break
            texts[0] = f"# {title}\n\n{texts[0]}"
            yield doc, texts, title
            produced += len(texts)
            doc += 1
            if produced >= n_chunks:
                return


@dataclass(frozen=True)
class Seeded:
    chunks: int
    documents: int
    words: int


def seed_corpus(url: str, n_chunks: int, *, seed: int = 7, pipeline: str = PIPELINE) -> Seeded:
    """Create and migrate the state store at `url` and fill it with `n_chunks` current chunks (bulk inserts)."""
    from sqlalchemy import insert

    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops.store import schema as t
    from runtime_ops.store.engine import utcnow

    store = open_store(url, get_settings(), pipeline=pipeline)
    now = utcnow()
    batch_id = f"{pipeline}-bench-000001"
    docs: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    n_docs = n_words = 0
    chunk_id = 0

    def flush(conn: Any) -> None:
        if docs:
            conn.execute(insert(t.documents), docs)
        if chunks:
            conn.execute(insert(t.chunks), chunks)
        docs.clear()
        chunks.clear()

    with store.tx() as conn:
        conn.execute(
            insert(t.landing_batches).values(
                id=batch_id,
                pipeline=pipeline,
                seq=1,
                source="bench://synthetic",
                created_at=now,
                n_objects=0,
                status="ingested",
                run_id="bench",
                ingested_at=now,
            )
        )
    for doc, texts, title in _texts(n_chunks, seed):
        doc_id = doc + 1
        body = "\n\n".join(texts)
        docs.append(
            {
                "id": doc_id,
                "pipeline": pipeline,
                "key": f"synthetic/doc-{doc:07d}.md",
                "version": "v1",
                "batch_id": batch_id,
                "size": len(body),
                "last_modified": now,
                "status": "ok",
                "content_hash": hashlib.sha256(body.encode()).hexdigest(),
                "format": "markdown",
                "title": title,
                "text": None,
                "processed_at": now,
            }
        )
        for i, text in enumerate(texts):
            chunk_id += 1
            chunks.append({"id": chunk_id, "document_id": doc_id, "ord": i, "text": text})
            n_words += text.count(" ") + 1
        n_docs += 1
        if len(chunks) >= 20_000:
            with store.tx() as conn:
                flush(conn)
    with store.tx() as conn:
        flush(conn)
        if store.dialect == "sqlite":
            conn.exec_driver_sql("ANALYZE")  # the planner's statistics, as a long-lived store has them
        else:
            # Explicit ids do not move PostgreSQL's sequences: later inserts (a landing batch) would collide.
            for table in ("documents", "chunks"):
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
                )
            conn.exec_driver_sql("ANALYZE")
    store.engine.dispose()
    return Seeded(chunk_id, n_docs, n_words)


def make_production(
    url: str, *, seed: int = 1, embed: bool = True, train_sample: int | None = None, pipeline: str = PIPELINE
) -> dict[str, Any]:
    """Train one lsa model the way `embedding_model` does (the spec's dim / max_features, a bounded sample of
    the spec's train_sample or `train_sample` chunks) but with another seed than the spec's (so the benchmark's
    candidate is a different version), set the `production` alias to it and, with `embed`, store its vectors
    for every chunk (`embed_missing`)."""
    import time

    from runtime_ops.components.loading import get_spec
    from runtime_ops.embedders.lsa import EmbedderParams, digest, train_embedder
    from runtime_ops.embedders.sampling import bounded_sample
    from runtime_ops.serving.indexing import embed_missing
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops_tests.support.fencing import set_fenced

    spec = get_spec(pipeline)
    store = open_store(url, get_settings(), pipeline=pipeline)
    e = spec.embedder
    params = EmbedderParams(dim=e.dim, max_features=e.max_features, seed=seed)
    limit = train_sample or e.train_sample
    t0 = time.perf_counter()
    texts = (text for page in store.documents.iter_current_chunks() for _, _, text in page)
    sample, seen = bounded_sample(texts, limit, seed=seed)
    embedder = train_embedder(sample, params)
    del sample
    data = embedder.to_bytes()
    model_digest = digest(data)
    artifact_id = store.artifacts.put_artifact("embedder", data, model_digest)
    model, _ = store.registry.register_model(
        digest=model_digest,
        artifact_id=artifact_id,
        params={"kind": "lsa", **params.to_dict(), "train_sample": limit},
        n_documents=0,
        n_chunks=seen,
        corpus_revision=store.ledger.corpus_revision(),
        run_id=None,
    )
    version = int(model["version"])
    set_fenced(store, "production", version, actor="bench")
    t1 = time.perf_counter()
    written = embed_missing(store, version, embedder=embedder) if embed else 0
    t2 = time.perf_counter()
    store.engine.dispose()
    return {
        "production_version": version,
        "train_s": round(t1 - t0, 2),
        "embed_s": round(t2 - t1, 2),
        "embedded": written,
        "dim": embedder.dim,
        "train_sample": limit,
    }


def make_pretrained_production(
    url: str, model: str = "all-MiniLM-L6-v2", *, pipeline: str = PIPELINE
) -> dict[str, Any]:
    """Register a sentence-transformers model (its identity, as `embedding_model` does for a pretrained kind) and
    point `production` at it; nothing is embedded."""
    from runtime_ops.embedders.lsa import digest
    from runtime_ops.embedders.reference import reference_bytes
    from runtime_ops.embedders.registry import _sentence_model  # pyright: ignore[reportPrivateUsage]  # one instance per process
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops_tests.support.fencing import set_fenced

    store = open_store(url, get_settings(), pipeline=pipeline)
    embedder = _sentence_model(model, 64)
    identity = embedder.identity()  # pyright: ignore[reportAttributeAccessIssue]  # pretrained kinds have it
    data = reference_bytes(identity)
    artifact_id = store.artifacts.put_artifact("embedder", data, digest(data))
    registered, _ = store.registry.register_model(
        digest=digest(data),
        artifact_id=artifact_id,
        params={**identity, "batch_size": 64},
        n_documents=0,
        n_chunks=0,
        corpus_revision=store.ledger.corpus_revision(),
        run_id=None,
    )
    version = int(registered["version"])
    set_fenced(store, "production", version, actor="bench")
    store.engine.dispose()
    return {"production_version": version, "dim": embedder.dim, "model": model}


def rss_mb() -> float:
    """This process's resident set size now (Linux /proc), in MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
