"""The embedded vector store: a folder of LanceDB tables, one per index (the `make dev` default).

Why LanceDB: every write is one versioned commit (a new manifest written last), so a process killed inside
`upsert` leaves the table at its previous version; reads need no server; the folder can live on S3 later.
Small indexes are searched exactly. Past `ANN_MIN_ROWS` rows `optimize()` builds an IVF_SQ index (k-means
partitions of 8-bit scalar-quantised vectors) and searches probe `NPROBES` partitions, then re-rank
`REFINE_FACTOR` x k candidates with exact distances. Measured here (128 dimensions, clustered vectors, queries
near the data, 2 cores): at 1M rows the build took 4.3 s and search p50 9.8 ms / p99 15.3 ms with recall@10
1.0; an exact scan took 124 ms already at 200k rows; IVF_HNSW_SQ built in 48 s at 200k for no better recall.
A BTree on `chunk_id` keeps the merge of an upsert from scanning the table.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from runtime_ops.vectors.base import (
    Hit,
    IndexMissing,
    IndexName,
    VectorIndex,
    VectorStore,
    VectorStoreError,
    as_matrix,
)

# Below this many rows an exact scan is fast enough (~12 ms at 20k x 128 here) and an ANN index is not needed.
ANN_MIN_ROWS = 20_000
# Candidates per hit re-ranked with exact distances when the ANN index answers; partitions probed per query.
REFINE_FACTOR = 10
NPROBES = 20


def _ids(values: Sequence[int]) -> str:
    return ", ".join(str(int(v)) for v in values)


class LanceVectorIndex(VectorIndex):
    def __init__(self, table: Any, name: IndexName, dim: int) -> None:
        self._table = table
        self.name = name
        self.dim = dim
        self._lock = threading.Lock()  # one writer per table in this process; lance commits are atomic anyway

    def _rows(self, chunk_ids: Sequence[int], document_ids: Sequence[int], vectors: np.ndarray) -> Any:
        import pyarrow as pa

        matrix = as_matrix(vectors, self.dim)
        if not (len(chunk_ids) == len(document_ids) == len(matrix)):
            raise ValueError(
                f"{len(chunk_ids)} ids, {len(document_ids)} document ids and {len(matrix)} vectors: they must match"
            )
        norms = np.linalg.norm(matrix, axis=1).astype(np.float32)
        flat = pa.array(matrix.reshape(-1), type=pa.float32())
        return pa.table(
            {
                "chunk_id": pa.array(np.asarray(chunk_ids, dtype=np.int64)),
                "document_id": pa.array(np.asarray(document_ids, dtype=np.int64)),
                "norm": pa.array(norms),
                "vector": pa.FixedSizeListArray.from_arrays(flat, self.dim),
            }
        )

    def upsert(self, chunk_ids: Sequence[int], document_ids: Sequence[int], vectors: np.ndarray) -> int:
        data = self._rows(chunk_ids, document_ids, vectors)
        if len(set(int(c) for c in chunk_ids)) != len(chunk_ids):
            raise ValueError("chunk ids repeat within one upsert")
        if not len(data):
            return 0
        with self._lock:
            # One merge commit: replaced and inserted rows appear together, or not at all.
            merge = self._table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
            merge.use_index(True).execute(data)
        return len(data)

    def _delete(self, column: str, values: Sequence[int]) -> int:
        if not values:
            return 0
        where = f"{column} IN ({_ids(values)})"
        with self._lock:
            before = self._table.count_rows(where)
            if before:
                self._table.delete(where)
        return before

    def delete_documents(self, document_ids: Sequence[int]) -> int:
        return self._delete("document_id", document_ids)

    def delete_chunks(self, chunk_ids: Sequence[int]) -> int:
        return self._delete("chunk_id", chunk_ids)

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        matrix = as_matrix(queries, self.dim)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        indexed = self._has_index("vector")
        out: list[list[Hit]] = []
        for q in matrix:
            if not np.any(q):
                out.append([])  # a zero query has no cosine similarity to anything
                continue
            # No filter: a prefilter is evaluated over every row before the ANN search (47 ms at 1M rows here);
            # zero rows have no cosine distance and are dropped below.
            query = self._table.search(q, vector_column_name="vector").distance_type("cosine").limit(k)
            query = query.select(["chunk_id", "document_id", "_distance"])
            if indexed:
                query = query.nprobes(NPROBES).refine_factor(REFINE_FACTOR)
            rows = query.to_arrow().to_pydict()
            hits = [
                Hit(int(c), int(d), float(1.0 - dist))
                for c, d, dist in zip(rows["chunk_id"], rows["document_id"], rows["_distance"], strict=True)
                if dist is not None and np.isfinite(dist)
            ]
            out.append(sorted(hits, key=lambda h: -h.score)[:k])
        return out

    def count(self) -> int:
        return int(self._table.count_rows())

    def missing(self, chunk_ids: Sequence[int]) -> list[int]:
        wanted = sorted({int(c) for c in chunk_ids})
        present: set[int] = set()
        for start in range(0, len(wanted), 10_000):
            part = wanted[start : start + 10_000]
            rows = self._table.search().where(f"chunk_id IN ({_ids(part)})").select(["chunk_id"]).limit(len(part))
            present.update(int(c) for c in rows.to_arrow().column("chunk_id").to_pylist())
        return [c for c in wanted if c not in present]

    def _has_index(self, column: str) -> bool:
        return any(list(i.columns) == [column] for i in self._table.list_indices())

    def has_ann_index(self) -> bool:
        return self._has_index("vector")

    def optimize(self) -> None:
        from lancedb.index import BTree, IvfSq

        with self._lock:
            if not self._has_index("chunk_id"):
                self._table.create_index("chunk_id", config=BTree())
            if self._table.count_rows() >= ANN_MIN_ROWS and not self._has_index("vector"):
                self._table.create_index("vector", config=IvfSq(distance_type="cosine"))
            # Compaction folds small upsert fragments together and new rows into the indexes; old versions go.
            self._table.optimize(cleanup_older_than=timedelta(minutes=10))


class LanceVectorStore(VectorStore):
    kind = "lance"

    def __init__(self, folder: Path) -> None:
        import lancedb

        self.folder = folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Every read sees the newest committed version: a long-lived table handle (a searcher's) would otherwise
            # keep answering from the version it opened.
            self._db = lancedb.connect(str(folder), read_consistency_interval=timedelta(0))
        except OSError as exc:
            raise VectorStoreError(
                f"cannot open the vector store folder {folder}: {exc.strerror or exc}; "
                "set RUNTIME_OPS_VECTOR_STORE to lance:///a/writable/folder"
            ) from None
        self._lock = threading.Lock()

    def _table_names(self) -> list[str]:
        names: list[str] = []
        page_token: str | None = None
        while True:
            reply = self._db.list_tables(page_token=page_token)
            names.extend(reply.tables)
            page_token = reply.page_token
            if not page_token:
                return names

    def open(self, name: IndexName, dim: int, *, create: bool = False) -> VectorIndex:
        import pyarrow as pa

        with self._lock:
            if name.table in self._table_names():
                table = self._db.open_table(name.table)
            elif not create:
                raise IndexMissing(f"no vector index {name.table} in {self.describe()}")
            else:
                schema = pa.schema(
                    [
                        pa.field("chunk_id", pa.int64(), nullable=False),
                        pa.field("document_id", pa.int64(), nullable=False),
                        pa.field("norm", pa.float32(), nullable=False),
                        pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
                    ]
                )
                table = self._db.create_table(name.table, schema=schema, exist_ok=True)
        have = table.schema.field("vector").type.list_size
        if have != dim:
            raise VectorStoreError(f"vector index {name.table} holds {have}-dimensional vectors, not {dim}")
        return LanceVectorIndex(table, name, dim)

    def drop(self, name: IndexName) -> bool:
        with self._lock:
            if name.table not in self._table_names():
                return False
            self._db.drop_table(name.table)
            return True

    def names(self, pipeline: str | None = None) -> list[IndexName]:
        found = [n for t in self._table_names() if (n := IndexName.from_table(t)) is not None]
        return sorted(n for n in found if pipeline is None or n.pipeline == pipeline)

    def describe(self) -> str:
        return f"lance://{self.folder}"
