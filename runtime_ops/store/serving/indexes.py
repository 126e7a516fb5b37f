"""Vector indexes: one row per model version and vector store, how far each has applied the change feed, and the
pipeline's serving one (the `retrieval_index` alias)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, update

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository, row_dict
from runtime_ops.tags import SERVING_INDEX_ALIAS

_I = t.retrieval_indexes
_A = t.aliases
_S = t.index_shards
# Built once: every search request reads it, and building the statement costs more than running it.
_SERVING = (
    select(_I)
    .select_from(_A.join(_I, and_(_A.c.target == _I.c.id, _A.c.pipeline == _I.c.pipeline)))
    .where(and_(_A.c.pipeline == bindparam("pipeline"), _A.c.name == SERVING_INDEX_ALIAS))
)

FILLING, READY, DROPPED = "filling", "ready", "dropped"


@dataclass(frozen=True)
class ShardProgress:
    """The shards of an index filled by a backfill: `count` planned (0: the index has no plan, one process fills
    it), `filled` of them done, `chunks` upserted by the filled ones."""

    count: int
    filled: tuple[int, ...]
    chunks: int

    @property
    def planned(self) -> bool:
        return self.count > 0

    @property
    def missing(self) -> tuple[int, ...]:
        done = set(self.filled)
        return tuple(i for i in range(self.count) if i not in done)

    @property
    def complete(self) -> bool:
        return self.planned and not self.missing


@dataclass(frozen=True)
class Backfill:
    """The shards of a model version's indexes still being filled by a backfill: `planned`, `filled` of them."""

    pipeline: str
    model_version: int
    planned: int
    filled: int


class Indexes(Repository):
    def index_for(self, model_version: int, backend: str, location: str) -> dict[str, Any] | None:
        """The live (not dropped) index of `model_version` in that vector store."""
        with self.tx() as conn:
            cond = and_(
                _I.c.model_version == model_version,
                _I.c.backend == backend,
                _I.c.location == location,
                _I.c.status != DROPPED,
                self.versioned(_I),
            )
            return row_dict(conn.execute(select(_I).where(cond).order_by(_I.c.id.desc()).limit(1)).first())

    def create_index(
        self, *, model_version: int, backend: str, location: str, dim: int, synced_seq: int, run_id: str | None
    ) -> dict[str, Any]:
        """A new index row (status `filling`); `synced_seq` is the change-feed position its fill starts from."""
        pipeline = self.owner("record a vector index")
        now = utcnow()
        with self.tx() as conn:
            res = conn.execute(
                insert(_I).values(
                    pipeline=pipeline,
                    model_version=model_version,
                    corpus_revision=0,
                    n_chunks=0,
                    artifact_id=None,
                    created_at=now,
                    updated_at=now,
                    run_id=run_id,
                    backend=backend,
                    location=location,
                    dim=dim,
                    synced_seq=synced_seq,
                    status=FILLING,
                )
            )
            assert res.inserted_primary_key is not None  # a one-row insert always has its key
            index_id = int(res.inserted_primary_key[0])
            row = row_dict(conn.execute(select(_I).where(_I.c.id == index_id)).first())
            assert row is not None
            return row

    def mark_synced(
        self, index_id: int, *, synced_seq: int, n_chunks: int, corpus_revision: int, ready: bool = True
    ) -> None:
        """Record that the index applied the feed up to `synced_seq` (and is complete, with `ready`)."""
        values: dict[str, Any] = {
            "synced_seq": synced_seq,
            "n_chunks": n_chunks,
            "corpus_revision": corpus_revision,
            "updated_at": utcnow(),
        }
        if ready:
            values["status"] = READY
        with self.tx() as conn:
            conn.execute(update(_I).where(and_(_I.c.id == index_id, self.owned(_I))).values(**values))

    def advance(self, index_id: int, synced_seq: int) -> None:
        """Record the change-feed position the index has applied (after each page of a sync)."""
        with self.tx() as conn:
            cond = and_(_I.c.id == index_id, self.owned(_I))
            conn.execute(update(_I).where(cond).values(synced_seq=synced_seq, updated_at=utcnow()))

    def mark_dropped(self, index_id: int) -> None:
        with self.tx() as conn:
            cond = and_(_I.c.id == index_id, self.owned(_I))
            conn.execute(update(_I).where(cond).values(status=DROPPED, updated_at=utcnow()))

    def get_index(self, index_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            return row_dict(conn.execute(select(_I).where(and_(_I.c.id == index_id, self.owned(_I)))).first())

    def list_indexes(self, *, include_dropped: bool = False) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_I).where(self.owned(_I))
            if not include_dropped:
                q = q.where(_I.c.status != DROPPED)
            return [dict(r._mapping) for r in conn.execute(q.order_by(_I.c.id))]

    def current_index(self) -> dict[str, Any] | None:
        """The index the scope's `retrieval_index` alias points at (one query: every search request asks)."""
        rows = self.fetch(_SERVING, {"pipeline": self.owner("read the serving index")})
        return dict(rows[0]._mapping) if rows else None

    def plan_shards(self, index_id: int, count: int) -> ShardProgress:
        """Plan the fill of index `index_id` in `count` shards (idempotent: a plan already made stays, and a plan
        of a different count is refused, since its shards would cover other chunks)."""
        progress = self.shard_progress(index_id)
        if progress.planned and progress.count != count:
            raise ValueError(
                f"index #{index_id} is already being filled in {progress.count} shards, not {count}: finish that "
                f"backfill (or drop the index) before filling it in {count}"
            )
        now = utcnow()
        with self.tx() as conn:
            rows = [{"index_id": index_id, "shard": i, "shard_count": count, "planned_at": now} for i in range(count)]
            conn.execute(upsert(_S, conn).on_conflict_do_nothing(), rows)
        return self.shard_progress(index_id)

    def mark_shard_filled(
        self, index_id: int, shard: int, *, chunks: int, centroid_sum: bytes | None, run_id: str | None
    ) -> None:
        """Record that `shard` of the index is embedded and upserted (`centroid_sum`: the sum of its vectors)."""
        with self.tx() as conn:
            cond = and_(_S.c.index_id == index_id, _S.c.shard == shard)
            values = {"filled_at": utcnow(), "chunks": chunks, "centroid_sum": centroid_sum, "run_id": run_id}
            conn.execute(update(_S).where(cond).values(**values))

    def shard_centroids(self, index_id: int) -> list[tuple[bytes, int]]:
        """(sum of vectors, count) of each filled shard of the index."""
        with self.tx() as conn:
            rows = conn.execute(
                select(_S.c.centroid_sum, _S.c.chunks).where(
                    and_(_S.c.index_id == index_id, _S.c.filled_at.is_not(None), _S.c.centroid_sum.is_not(None))
                )
            ).all()
        return [(bytes(r.centroid_sum), int(r.chunks or 0)) for r in rows]

    def shard_progress(self, index_id: int) -> ShardProgress:
        with self.tx() as conn:
            rows = conn.execute(
                select(_S.c.shard, _S.c.shard_count, _S.c.filled_at, _S.c.chunks)
                .join(_I, _I.c.id == _S.c.index_id)
                .where(and_(_S.c.index_id == index_id, self.owned(_I)))
                .order_by(_S.c.shard)
            ).all()
        if not rows:
            return ShardProgress(0, (), 0)
        filled = tuple(int(r.shard) for r in rows if r.filled_at is not None)
        return ShardProgress(int(rows[0].shard_count), filled, sum(int(r.chunks or 0) for r in rows))

    def backfills(self) -> list[Backfill]:
        """Shards planned and filled per (pipeline, model version) of the indexes still `filling` with a plan (a
        dropped or ready index is left out), in one aggregate; every pipeline's on an unscoped store."""
        rows = self.fetch(
            select(_I.c.pipeline, _I.c.model_version, func.count().label("planned"), func.count(_S.c.filled_at))
            .select_from(_S.join(_I, _I.c.id == _S.c.index_id))
            .where(and_(_I.c.status == FILLING, self.owned(_I)))
            .group_by(_I.c.pipeline, _I.c.model_version)
            .order_by(_I.c.pipeline, _I.c.model_version)
        )
        return [Backfill(str(p), int(v), int(planned), int(filled)) for p, v, planned, filled in rows]
