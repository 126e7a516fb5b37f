"""pgvector on PostgreSQL, one index: a table in the `runtime_ops_vectors` schema with an HNSW graph (cosine), and
what is done with it (upsert, delete, search, building the graph, calibrating its ef_search). The store around the
indexes (connection, schema setup, creating, dropping and listing index tables) is `vectors/pgvector_store.py`.

An upsert is one transaction (COPY into a temporary table, then INSERT ... ON CONFLICT), so a killed writer
leaves nothing behind; a delete is one statement.

Once a table has its HNSW graph, inserting into it costs ~200-400 rows/s on one core here, and more as the graph
grows: so writes go to the index's small **delta** table (`<table>_delta`, no graph; the rows it replaces leave
the main table in the same transaction), searches read both (the graph's top k and the delta's exact top k,
merged), and `optimize()` folds the delta into the graph off the path that makes new documents searchable.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from runtime_ops.vectors.base import Hit, IndexName, VectorIndex, VectorStoreError, as_matrix

SCHEMA = "runtime_ops_vectors"
# Indexes smaller than this are searched exactly (a sequential scan; ~50 ms at 100k x 384 here, too slow for a
# query API), larger ones through HNSW. Queries far from every cluster make HNSW's recall@10 drop to ~0.7 at
# pgvector's default ef_search.
EXACT_MAX_ROWS = 20_000
# HNSW candidates per search (`hnsw.ef_search`; pgvector's default is 40). The recall an ef_search buys depends on
# the data: at 100k real lsa vectors ef_search 200 reached recall@10 0.95 and 40 only 0.84, while at 1M rows (the
# same vectors plus 900k near-duplicates) 40 already reached 0.995 where 400 cost 57 ms a query. So each graph is
# calibrated when it is built: CALIBRATION_QUERIES sampled rows, moved by noise of norm CALIBRATION_NOISE (queries
# near the data), are answered exactly (a sequential scan) and through the graph at each EF_LADDER step; the
# smallest ef_search reaching RECALL_TARGET is kept with the index (`index_tuning`) and used by every search.
EF_LADDER = (40, 64, 100, 150, 200, 300, 400, 600, 800)
EF_SEARCH_UNCALIBRATED = 400  # an index built before calibration existed
RECALL_TARGET = 0.97
CALIBRATION_QUERIES = 40
CALIBRATION_NOISE = 0.3
RECALIBRATE_GROWTH = 0.2  # calibrate again when optimize() finds the graph's table this much larger
TUNING = f"{SCHEMA}.index_tuning"
# The HNSW graph is built by `optimize()` once the table holds EXACT_MAX_ROWS rows, in one CREATE INDEX after the
# bulk load: measured here at 384 dimensions, building over 20k rows took 5 s (4,000 rows/s) where inserting the
# same rows into an existing graph ran at ~400 rows/s. Graph quality, measured on 100k lsa vectors (128
# dimensions) with queries near the data: m 16 / ef_construction 64 reached recall@10 0.82 at ef_search 200 and
# 0.91 at 400; m 24 / ef_construction 128 reached 0.95 and 0.98 (p99 9.9 ms), for a 3x longer build (50 s).
HNSW_BUILD = "WITH (m = 24, ef_construction = 128)"
# maintenance_work_mem of the build, sized to the graph: one that does not fit is built far more slowly (at 1M x
# 128 with 1 GB the graph outgrew it near the end and the build took 50 min on 2 cores). Per row: the vector, the
# layer-0 neighbour list (2m tuple ids) and pgvector's element overhead, with a margin; capped.
BUILD_BYTES_PER_ROW_OVERHEAD = 2 * 24 * 8 + 128
BUILD_MEMORY_MIN_MB, BUILD_MEMORY_MAX_MB = 64, 4096


def build_memory_mb(rows: int, dim: int) -> int:
    need = rows * (4 * dim + BUILD_BYTES_PER_ROW_OVERHEAD) * 1.5 / 2**20
    return int(min(BUILD_MEMORY_MAX_MB, max(BUILD_MEMORY_MIN_MB, need)))


def _literal(row: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in row) + "]"


def _copy_rows(chunk_ids: Sequence[int], document_ids: Sequence[int], matrix: np.ndarray) -> io.StringIO:
    buf = io.StringIO()
    # float32 -> shortest repr that round-trips through float32 (%.9g); rows as pgvector text literals.
    for cid, did, row in zip(chunk_ids, document_ids, matrix, strict=True):
        buf.write(f"{int(cid)}\t{int(did)}\t[{','.join(f'{x:.9g}' for x in row.tolist())}]\n")
    buf.seek(0)
    return buf


def delta_table(name: IndexName) -> str:
    return f"{name.table}_delta"


class PgVectorConnection(Protocol):
    """What an index uses of its store (`vectors/pgvector_store.py`'s `PgVectorStore`, which imports this module)."""

    def raw(self, *, autocommit: bool = False) -> AbstractContextManager[Any]: ...

    def estimated_rows(self, qualified: str) -> int: ...


class PgVectorIndex(VectorIndex):
    def __init__(self, store: PgVectorConnection, name: IndexName, dim: int) -> None:
        self._store = store
        self.name = name
        self.dim = dim
        self._qualified = f'{SCHEMA}."{name.table}"'
        self._delta = f'{SCHEMA}."{delta_table(name)}"'

    def upsert(self, chunk_ids: Sequence[int], document_ids: Sequence[int], vectors: np.ndarray) -> int:
        matrix = as_matrix(vectors, self.dim)
        if not (len(chunk_ids) == len(document_ids) == len(matrix)):
            raise ValueError(
                f"{len(chunk_ids)} ids, {len(document_ids)} document ids and {len(matrix)} vectors: they must match"
            )
        if len(set(int(c) for c in chunk_ids)) != len(chunk_ids):
            raise ValueError("chunk ids repeat within one upsert")
        if not len(matrix):
            return 0
        with self._store.raw() as cur:
            cur.execute(
                "CREATE TEMPORARY TABLE _rv_upsert (chunk_id bigint, document_id bigint, embedding text) ON COMMIT DROP"
            )
            cur.copy_expert("COPY _rv_upsert FROM STDIN", _copy_rows(chunk_ids, document_ids, matrix))
            target = self._qualified
            if _has_graph(cur, self.name):
                # Into the delta; the rows it replaces leave the graph's table (a delete only marks them dead).
                target = self._delta
                cur.execute(f"DELETE FROM {self._qualified} m USING _rv_upsert u WHERE m.chunk_id = u.chunk_id")
            cur.execute(
                f"INSERT INTO {target} (chunk_id, document_id, embedding) "
                f"SELECT chunk_id, document_id, embedding::vector({self.dim}) FROM _rv_upsert "
                "ON CONFLICT (chunk_id) DO UPDATE SET document_id = EXCLUDED.document_id, "
                "embedding = EXCLUDED.embedding"
            )
        return len(matrix)

    def _delete(self, column: str, values: Sequence[int]) -> int:
        if not values:
            return 0
        removed = 0
        with self._store.raw() as cur:
            for table in (self._qualified, self._delta):
                cur.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", ([int(v) for v in values],))
                removed += int(cur.rowcount)
        return removed

    def delete_documents(self, document_ids: Sequence[int]) -> int:
        return self._delete("document_id", document_ids)

    def delete_chunks(self, chunk_ids: Sequence[int]) -> int:
        return self._delete("chunk_id", chunk_ids)

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        matrix = as_matrix(queries, self.dim)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        out: list[list[Hit]] = []
        with self._store.raw() as cur:
            rows, ef = self._plan(cur)
            if rows < EXACT_MAX_ROWS:
                cur.execute("SET LOCAL enable_indexscan = off")
            else:
                cur.execute(f"SET LOCAL hnsw.ef_search = {max(ef or EF_SEARCH_UNCALIBRATED, 2 * k)}")
            # Zero vectors have no cosine distance (NaN): HNSW leaves them out, the exact scan's are filtered here.
            for q in matrix:
                if not np.any(q):
                    out.append([])
                    continue
                # The graph's (or the exact scan's) top k and the delta's exact top k, merged.
                cur.execute(
                    "SELECT chunk_id, document_id, dist FROM ("
                    f"(SELECT chunk_id, document_id, embedding <=> %(q)s::vector AS dist FROM {self._qualified} "
                    "ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s) UNION ALL "
                    f"(SELECT chunk_id, document_id, embedding <=> %(q)s::vector AS dist FROM {self._delta} "
                    "ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s)) hits ORDER BY dist LIMIT %(k)s",
                    {"q": _literal(q), "k": k},
                )
                hits = [Hit(int(c), int(d), 1.0 - float(dist)) for c, d, dist in cur.fetchall()]
                out.append(sorted((h for h in hits if np.isfinite(h.score)), key=lambda h: -h.score))
        return out

    def _estimated_rows(self, cur: Any) -> int:
        return row_estimate(cur, self._qualified)

    def _plan(self, cur: Any) -> tuple[int, int | None]:
        """(the graph table's row estimate, its calibrated ef_search or None) in one round trip."""
        cur.execute(
            f"SELECT greatest(c.reltuples, 0)::bigint, (SELECT t.ef_search FROM {TUNING} t WHERE t.table_name = %s) "
            "FROM pg_class c WHERE c.oid = %s::regclass",
            (self.name.table, self._qualified),
        )
        row = cur.fetchone()
        return (int(row[0]), row[1]) if row else (0, None)

    def tuning(self) -> dict[str, Any] | None:
        """The graph's calibration: ef_search, the recall@10 it reached, rows then, when."""
        with self._store.raw() as cur:
            cur.execute(
                f"SELECT ef_search, recall, n_rows, calibrated_at FROM {TUNING} WHERE table_name = %s",
                (self.name.table,),
            )
            row = cur.fetchone()
        if row is None:
            return None
        return {"ef_search": row[0], "recall": row[1], "rows": row[2], "calibrated_at": row[3]}

    def calibrate(self, *, target: float = RECALL_TARGET, seed: int = 0) -> dict[str, Any]:
        """Measure recall@10 against exact search at each ef_search of EF_LADDER on queries near the data, and
        keep the smallest that reaches `target` (else the largest). Needs the graph (`optimize()` calls it)."""
        k = 10
        rng = np.random.default_rng(seed)
        with self._store.raw() as cur:
            rows = row_estimate(cur, self._qualified)
            fraction = min(100.0, max(0.01, 100.0 * 20 * CALIBRATION_QUERIES / max(rows, 1)))
            cur.execute(
                f"SELECT embedding::text FROM {self._qualified} TABLESAMPLE SYSTEM (%s) REPEATABLE (%s) LIMIT %s",
                (fraction, seed, CALIBRATION_QUERIES),
            )
            sample = np.array([np.array(json.loads(r[0]), dtype=np.float32) for r in cur.fetchall()])
        if len(sample) == 0:
            raise VectorStoreError(f"cannot calibrate {self.name.table}: it has no rows")
        noise = rng.normal(scale=CALIBRATION_NOISE / np.sqrt(self.dim), size=sample.shape)
        queries = sample / np.maximum(np.linalg.norm(sample, axis=1, keepdims=True), 1e-12) + noise
        queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
        top = f"SELECT chunk_id FROM {self._qualified} ORDER BY embedding <=> %s::vector LIMIT {k}"
        with self._store.raw() as cur:
            cur.execute("SET LOCAL enable_indexscan = off")  # the exact answers: a sequential scan
            exact = []
            for q in queries:
                cur.execute(top, (_literal(q),))
                exact.append({int(r[0]) for r in cur.fetchall()})
        chosen, reached = EF_LADDER[-1], 0.0
        with self._store.raw() as cur:
            for ef in EF_LADDER:
                cur.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                hits = 0
                for q, want in zip(queries, exact, strict=True):
                    cur.execute(top, (_literal(q),))
                    hits += len({int(r[0]) for r in cur.fetchall()} & want)
                reached = hits / (k * len(queries))
                if reached >= target:
                    chosen = ef
                    break
            cur.execute(
                f"INSERT INTO {TUNING} (table_name, ef_search, recall, n_rows, calibrated_at) "
                "VALUES (%s, %s, %s, %s, now()) ON CONFLICT (table_name) DO UPDATE SET ef_search = EXCLUDED.ef_search, "
                "recall = EXCLUDED.recall, n_rows = EXCLUDED.n_rows, calibrated_at = EXCLUDED.calibrated_at",
                (self.name.table, chosen, reached, rows),
            )
        return {"ef_search": chosen, "recall": reached, "rows": rows}

    def count(self) -> int:
        with self._store.raw() as cur:
            cur.execute(f"SELECT (SELECT count(*) FROM {self._qualified}) + (SELECT count(*) FROM {self._delta})")
            return int(cur.fetchone()[0])

    def missing(self, chunk_ids: Sequence[int]) -> list[int]:
        wanted = sorted({int(c) for c in chunk_ids})
        if not wanted:
            return []
        with self._store.raw() as cur:
            cur.execute(
                f"SELECT w FROM unnest(%s::bigint[]) AS w WHERE NOT EXISTS "
                f"(SELECT 1 FROM {self._qualified} t WHERE t.chunk_id = w) AND NOT EXISTS "
                f"(SELECT 1 FROM {self._delta} d WHERE d.chunk_id = w) ORDER BY w",
                (wanted,),
            )
            return [int(r[0]) for r in cur.fetchall()]

    def has_ann_index(self) -> bool:
        with self._store.raw() as cur:
            return _has_graph(cur, self.name)

    def optimize(self) -> None:
        with self._store.raw() as cur:
            # The delta joins the graph's table (the graph's inserts are paid here, not by the upserts).
            cur.execute(
                f"INSERT INTO {self._qualified} (chunk_id, document_id, embedding) "
                f"SELECT chunk_id, document_id, embedding FROM {self._delta} "
                "ON CONFLICT (chunk_id) DO UPDATE SET document_id = EXCLUDED.document_id, "
                "embedding = EXCLUDED.embedding"
            )
            cur.execute(f"DELETE FROM {self._delta}")
        with self._store.raw(autocommit=True) as cur:
            cur.execute(f"VACUUM (ANALYZE) {self._qualified}")
            cur.execute(f"VACUUM (ANALYZE) {self._delta}")
        rows = self._store.estimated_rows(self._qualified)
        if rows < EXACT_MAX_ROWS:
            return
        if self.has_ann_index():
            tuned = self.tuning()
            if tuned is None or rows >= tuned["rows"] * (1 + RECALIBRATE_GROWTH):
                self.calibrate()
            return
        with self._store.raw() as cur:
            cur.execute(f"SET LOCAL maintenance_work_mem = '{build_memory_mb(rows, self.dim)}MB'")
            cur.execute(
                f'CREATE INDEX IF NOT EXISTS "{self.name.table}_hnsw" ON {self._qualified} '
                f"USING hnsw (embedding vector_cosine_ops) {HNSW_BUILD}"
            )
        self.calibrate()


def _has_graph(cur: Any, name: IndexName) -> bool:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f'{SCHEMA}."{name.table}_hnsw"',))
    return bool(cur.fetchone()[0])


def row_estimate(cur: Any, qualified: str) -> int:
    """The planner's row count of the table (exact after VACUUM ANALYZE, which `optimize()` runs)."""
    cur.execute("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass", (qualified,))
    row = cur.fetchone()
    return int(row[0]) if row else 0
