"""Querying a pipeline's serving index (glue: state store + vector store + the production embedder).

The `retrieval_index` alias is read once per request and that index answers the whole request, so a request
never mixes two model versions, also while a promotion or rollback swaps the alias: the index it read stays
intact (retention never drops the serving index or the rollback target).

`warm` loads what the next request needs (the serving model's embedder, the index's open handle, one query through
both) ahead of it: the ops API calls it before it reports ready and again whenever the alias moves.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_ops.embedders.base import TextEmbedder
from runtime_ops.embedders.registry import load_embedder
from runtime_ops.store import StateStore
from runtime_ops.store.serving.indexes import READY
from runtime_ops.vectors.base import IndexName, VectorIndex, VectorStore

MAX_K = 100
# What warming embeds: any text does, the model's first inference is what costs (loading weights, a first batch).
WARM_QUERY = "warm up the serving model"


class NoServingIndex(LookupError):
    """The pipeline serves no index yet, or its index lives in another vector store than the one configured."""


@dataclass(frozen=True)
class SearchHit:
    chunk_id: int
    document_key: str
    title: str
    score: float
    text: str
    document_id: int  # the document version the chunk belongs to
    ord: int  # the chunk's place in it (consecutive chunks share their overlap)

    def as_dict(self) -> dict[str, Any]:
        """The hit as a response shows it: no score. Scores are each model's own similarities, on each model's own
        scale: in an interleaved list each team's scores fall on their own, so they would tell the teams apart."""
        return {"chunk_id": self.chunk_id, "document_key": self.document_key, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class SearchResult:
    pipeline: str
    model_version: int
    index_id: int
    hits: list[list[SearchHit]]  # one list per query
    query_vectors: Any  # numpy array: what the extractive answerer scores sentences against


class Searcher:
    """Answers queries of one pipeline from its serving index; embedders are loaded once per model version."""

    def __init__(self, store: StateStore, vectors: VectorStore) -> None:
        if store.pipeline is None:
            raise ValueError("a Searcher serves one pipeline: pass a scoped store")
        self.store, self.vectors = store, vectors
        self._embedders: dict[int, TextEmbedder] = {}
        # Open index handles by index row id (a refilled index is a new row): opening one costs a manifest read
        # (LanceDB, ~1.2 ms) or a catalog query (pgvector) per request otherwise. Handles read the newest version.
        self._indexes: dict[int, VectorIndex] = {}
        self._warmed: int | None = None  # the index id `warm` last loaded and queried
        self._lock = threading.Lock()
        self._loading = threading.Lock()

    def embedder(self, version: int) -> TextEmbedder:
        with self._lock:
            found = self._embedders.get(version)
        if found is None:
            # One load at a time: a request that comes while the warm-up loads this model waits for that load
            # rather than loading the same weights a second time.
            with self._loading:
                with self._lock:
                    found = self._embedders.get(version)
                if found is None:
                    found = load_embedder(self.store.registry, self.store.artifacts, version)
                    with self._lock:
                        self._embedders[version] = found
        return found

    def serving_index(self) -> dict[str, Any]:
        row = self.store.indexes.current_index()
        if row is None:
            raise NoServingIndex(f"pipeline {self.store.pipeline!r} serves no index yet (no retrieval_index)")
        if row["backend"] != self.vectors.kind or row["location"] != self.vectors.describe():
            raise NoServingIndex(
                f"pipeline {self.store.pipeline!r} serves index #{row['id']} from {row['backend']} "
                f"{row['location']!r}, not from its configured vector store {self.vectors.describe()!r}: "
                "materialize retrieval_index to build it there"
            )
        return row

    def _index(self, row: dict[str, Any], dim: int) -> VectorIndex:
        index_id = int(row["id"])
        with self._lock:
            found = self._indexes.get(index_id)
        if found is None:
            assert self.store.pipeline is not None
            found = self.vectors.open(IndexName(self.store.pipeline, int(row["model_version"])), int(row["dim"] or dim))
            with self._lock:
                # Only the serving index, the one before it and a rollout's candidate are asked for; older handles
                # are let go.
                for old in sorted(self._indexes)[:-2]:
                    del self._indexes[old]
                self._indexes[index_id] = found
        return found

    @property
    def warmed(self) -> int | None:
        """The id of the index `warm` last made ready to answer (None: none yet)."""
        return self._warmed

    def warm(self) -> int:
        """Load the serving index's embedder and open the index, and run one query through both, so that the next
        request pays for neither; returns the index id. Cheap once done (one read of the alias). Raises
        NoServingIndex (the pipeline serves no index from this vector store yet) and what loading raises."""
        row = self.serving_index()
        index_id = int(row["id"])
        if self._warmed == index_id:
            return index_id
        self.warm_index(row)
        self._warmed = index_id
        return index_id

    def warm_index(self, row: dict[str, Any]) -> None:
        """Load `row`'s embedder, open the index and run one query through both (the serving index, or a rollout's
        candidate index)."""
        embedder = self.embedder(int(row["model_version"]))
        embedder.embed([WARM_QUERY])
        # A unit query, not the embedded text: a model that knows none of its words embeds it as zeros, which an
        # index answers without reading anything.
        probe = np.full((1, embedder.dim), 1.0 / np.sqrt(embedder.dim), dtype=np.float32)
        self._index(row, embedder.dim).search(probe, 1)

    def index_row(self, index_id: int) -> dict[str, Any]:
        """Index `index_id` of this pipeline as a request reads it (a rollout's candidate index): complete and in
        the configured vector store, else NoServingIndex."""
        row = self.store.indexes.get_index(index_id)
        if row is None or row["status"] != READY:
            raise NoServingIndex(f"pipeline {self.store.pipeline!r} has no complete index #{index_id}")
        if row["backend"] != self.vectors.kind or row["location"] != self.vectors.describe():
            raise NoServingIndex(
                f"index #{index_id} of pipeline {self.store.pipeline!r} lives in {row['backend']} "
                f"{row['location']!r}, not in its configured vector store {self.vectors.describe()!r}"
            )
        return row

    def search(self, queries: Sequence[str], k: int) -> SearchResult:
        # The alias is read once: this index answers every query of the request.
        return self.search_index(self.serving_index(), queries, k)

    def search_index(self, row: dict[str, Any], queries: Sequence[str], k: int) -> SearchResult:
        """The queries answered from the index `row` alone (read once by the caller: the serving index, or a
        rollout's candidate index)."""
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
        version = int(row["model_version"])
        embedder = self.embedder(version)
        vectors = embedder.embed(list(queries))
        found = self._index(row, embedder.dim).search(vectors, k)
        assert self.store.pipeline is not None
        rows = self.store.documents.chunk_rows(sorted({h.chunk_id for hits in found for h in hits}))
        hits = [
            [
                SearchHit(h.chunk_id, r.key, r.title, h.score, r.text, r.document_id, r.ord)
                for h in query_hits
                if (r := rows.get(h.chunk_id)) is not None
            ]
            for query_hits in found
        ]
        return SearchResult(self.store.pipeline, version, int(row["id"]), hits, vectors)
