"""The vector store interface (numpy only, no I/O): what every backend does and promises.

An index holds the vectors of one model version of one pipeline: a row per chunk (chunk id, document id, vector).
Which index serves a pipeline is not the backend's business: the state store's `retrieval_index` alias names it,
so a swap is one fenced write there, and every index stays intact until retention drops it.

Promises every backend keeps (`runtime_ops_tests/integration/test_vector_backends.py` checks them on each):
- `upsert` is idempotent and atomic per call: a chunk id already present is replaced, and a call interrupted by a
  crash leaves the index as it was before the call or as after it, never half-written;
- `delete_documents` removes every chunk of those documents (in one atomic step);
- `search` returns, per query, at most k hits ordered by descending cosine similarity; rows whose similarity is
  undefined (an all-zero vector) are never returned;
- indexes of different names are independent; `open(create=False)` of a missing one raises `IndexMissing`.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy stays out of the code location's load (the serving assets import this module)
    import numpy as np

_PIPELINE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class IndexMissing(LookupError):
    """The named index does not exist in this vector store."""


class VectorStoreError(RuntimeError):
    """A backend could not do what was asked; the message names the store and the fix."""


@dataclass(frozen=True, order=True)
class IndexName:
    pipeline: str
    model_version: int

    def __post_init__(self) -> None:
        if not _PIPELINE.match(self.pipeline):
            raise ValueError(f"pipeline name {self.pipeline!r} cannot name a vector index")
        if isinstance(self.model_version, bool) or not isinstance(self.model_version, int) or self.model_version < 1:
            raise ValueError(f"model version must be a positive integer, got {self.model_version!r}")

    @property
    def table(self) -> str:
        """The backend's table / dataset name: `rv_<pipeline>_v<version>` (safe as an SQL identifier)."""
        return f"rv_{self.pipeline}_v{self.model_version}"

    @classmethod
    def from_table(cls, table: str) -> IndexName | None:
        m = re.match(r"^rv_([a-z][a-z0-9_]{0,39})_v([1-9][0-9]*)$", table)
        return cls(m.group(1), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    document_id: int
    score: float  # cosine similarity, in [-1, 1]


def as_matrix(vectors: np.ndarray | Sequence[Sequence[float]], dim: int) -> np.ndarray:
    """`vectors` as a C-contiguous float32 matrix of `dim` columns; ValueError naming the shape otherwise."""
    import numpy as np

    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"expected vectors of {dim} dimensions, got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("vectors contain NaN or infinite values")
    return arr


class VectorIndex(abc.ABC):
    """The vectors of one model version of one pipeline."""

    name: IndexName
    dim: int

    @abc.abstractmethod
    def upsert(self, chunk_ids: Sequence[int], document_ids: Sequence[int], vectors: np.ndarray) -> int:
        """Insert or replace these rows (atomically); returns how many rows were given."""

    @abc.abstractmethod
    def delete_documents(self, document_ids: Sequence[int]) -> int:
        """Remove every chunk of these documents; returns how many rows were removed."""

    @abc.abstractmethod
    def delete_chunks(self, chunk_ids: Sequence[int]) -> int:
        """Remove these chunks; returns how many rows were removed."""

    @abc.abstractmethod
    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """The k nearest rows of each query (approximate where the backend builds an ANN structure)."""

    @abc.abstractmethod
    def count(self) -> int:
        """Rows in the index."""

    @abc.abstractmethod
    def missing(self, chunk_ids: Sequence[int]) -> list[int]:
        """Those of `chunk_ids` that the index does not hold."""

    def has_ann_index(self) -> bool:
        """Whether searches are answered by an approximate index (False: an exact scan)."""
        return False

    def optimize(self) -> None:  # noqa: B027 - optional: backends that keep their ANN structure current need nothing
        """Fold recent writes into the ANN structure and reclaim space (cheap to call; may do nothing)."""


class VectorStore(abc.ABC):
    """A place holding indexes: a folder (embedded) or a database (pgvector)."""

    kind: str

    @abc.abstractmethod
    def open(self, name: IndexName, dim: int, *, create: bool = False) -> VectorIndex:
        """The index `name`; with `create`, made empty when missing. A `dim` other than the index's raises
        VectorStoreError; a missing index without `create` raises IndexMissing."""

    @abc.abstractmethod
    def drop(self, name: IndexName) -> bool:
        """Remove the index and its vectors; False when there was none."""

    @abc.abstractmethod
    def names(self, pipeline: str | None = None) -> list[IndexName]:
        """The indexes this store holds (of one pipeline, or all), sorted."""

    def close(self) -> None:  # noqa: B027 - stores without connections have nothing to release
        """Release connections; the store is not used afterwards."""

    def describe(self) -> str:
        """Where the vectors live, for messages and metadata (never a password)."""
        return self.kind
