"""Opening a vector store from its URL: `lance:///abs/folder` (embedded) or `postgresql://…` (pgvector)."""

from __future__ import annotations

import threading
from pathlib import Path

from runtime_ops.pipeline.spec import VectorStoreSpec
from runtime_ops.vectors.base import VectorStore, VectorStoreError

SCHEMES = ("lance://", "postgresql://", "postgresql+psycopg2://", "postgres://")


def check_url(url: str) -> str:
    """`url` if a vector store can be opened from it; ValueError naming the accepted forms otherwise."""
    if not url.startswith(SCHEMES):
        raise ValueError("must be lance:///absolute/folder (embedded) or postgresql://user:pw@host:5432/db (pgvector)")
    if url.startswith("lance://") and not Path(url[len("lance://") :]).is_absolute():
        raise ValueError("a lance:// URL names an absolute folder: lance:///var/lib/runtime_ops/vectors")
    return url


def open_vector_store(url: str) -> VectorStore:
    check_url(url)
    if url.startswith("lance://"):
        # numpy: kept out of the code location's load
        from runtime_ops.vectors.lance import LanceVectorStore

        return LanceVectorStore(Path(url[len("lance://") :]))
    # numpy: kept out of the code location's load
    from runtime_ops.vectors.pgvector_store import PgVectorStore

    return PgVectorStore(url)


_SHARED: dict[str, VectorStore] = {}
_SHARED_LOCK = threading.Lock()


def shared_vector_store(url: str) -> VectorStore:
    """One store per URL in this process (its connections or open tables are reused by every caller)."""
    with _SHARED_LOCK:
        store = _SHARED.get(url)
        if store is None:
            store = _SHARED[url] = open_vector_store(url)
        return store


def pipeline_vector_store(spec: VectorStoreSpec) -> VectorStore:
    """The vector store a pipeline declares (`vector_store:` in its defs.yaml, or the process default)."""
    try:
        url = spec.resolve()
        return shared_vector_store(check_url(url))
    except ValueError as exc:
        raise VectorStoreError(f"vector_store: {exc}") from None
