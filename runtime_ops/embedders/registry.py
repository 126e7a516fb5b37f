"""Loading models and the current corpus from the state store (glue, no Dagster)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from runtime_ops.store import StateStore

if TYPE_CHECKING:
    from runtime_ops.embedders.lsa import Embedder


@functools.lru_cache(maxsize=8)
def _embedder_from_bytes(digest: str, data: bytes) -> Embedder:
    from runtime_ops.embedders.lsa import Embedder

    return Embedder.from_bytes(data)


def load_embedder(store: StateStore, version: int) -> Embedder:
    model = store.registry.get_model(version)
    if model is None:
        raise LookupError(f"model version {version} is not in the registry")
    return _embedder_from_bytes(model["digest"], store.artifacts.get_artifact(model["artifact_id"]))


def corpus(store: StateStore) -> tuple[list[int], list[str], list[str]]:
    """Chunk ids, document keys and texts of the current corpus, in chunk id order."""
    ids: list[int] = []
    keys: list[str] = []
    texts: list[str] = []
    for page in store.documents.iter_current_chunks():
        for cid, key, text in page:
            ids.append(cid)
            keys.append(key)
            texts.append(text)
    return ids, keys, texts
