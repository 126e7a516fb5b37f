"""A small served model for API tests: documents landed, an lsa model trained on them, its index filled and
`retrieval_index` pointed at it, in a second or two (no Dagster run)."""

from __future__ import annotations

from runtime_ops.embedders.lsa import EmbedderParams, digest, train_embedder
from runtime_ops.locks.factory import locker_for
from runtime_ops.models.promotion_saga import lock_name
from runtime_ops.serving.vector_index import ensure_index
from runtime_ops.settings import get_settings
from runtime_ops.store import NewObject, StateStore
from runtime_ops.vectors.base import VectorStore

TOPICS = ("quokka tracker export", "json pretty printing", "csv dialect sniffing", "sqlite cursor commits")


def serve_new_model(store: StateStore, vectors: VectorStore, seed: int) -> int:
    """Land documents, train an lsa model on them, fill its index and point `retrieval_index` at it (fenced, under
    the pipeline's promotion lock, as a promotion does); the index id."""
    keys = [f"notes/{seed}-{i}.md" for i in range(len(TOPICS) * 3)]
    batch = store.ledger.record_batch("test://", [NewObject(k, "v1", 10, None) for k in keys])
    assert batch is not None
    topics = [TOPICS[i % len(TOPICS)] for i in range(len(keys))]
    texts = [f"{topic} note {i} of set {seed}: how the {topic} works." for i, topic in enumerate(topics)]
    for doc, text in zip(
        sorted(store.documents.batch_documents(batch["id"]), key=lambda d: d["key"]), texts, strict=True
    ):
        store.documents.store_chunks(doc["id"], [text])
    params = EmbedderParams(dim=8, seed=seed)
    embedder = train_embedder([t for _, _, t in store.documents.current_chunks()], params)
    data = embedder.to_bytes()
    model, _ = store.registry.register_model(
        digest=digest(data),
        artifact_id=store.artifacts.put_artifact("embedder", data, digest(data)),
        params={"kind": "lsa", **params.to_dict()},
        n_documents=len(keys),
        n_chunks=len(keys),
        corpus_revision=store.ledger.corpus_revision(),
        run_id=None,
    )
    version = int(model["version"])
    index = ensure_index(store, vectors, version, embedder=embedder)
    assert store.pipeline is not None
    with locker_for(None, get_settings().resolved_database_url, get_settings()).hold(
        lock_name(store.pipeline)
    ) as lease:
        store.registry.set_alias("production", version, actor="test", fence=lease.fence)
        store.registry.set_alias("retrieval_index", index.index_id, actor="test", fence=lease.fence)
    return index.index_id
