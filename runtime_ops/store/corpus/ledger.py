"""The landing ledger: landing batches (the unit Dagster partitions by) and the (key, version) of every
document they recorded, per pipeline; the corpus revision watermark."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, String, and_, any_, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import IntegrityError

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.operations.metrics import Metrics
from runtime_ops.store.operations.series import LANDING_LAG, LANDING_LAG_BOUNDS, canonical_labels, histogram
from runtime_ops.store.scope import Repository, row_dict


@dataclass(frozen=True)
class NewObject:
    key: str
    version: str
    size: int
    last_modified: datetime | None


_D = t.documents
_KNOWN_VERSIONS_PG = select(_D.c.key, _D.c.version).where(
    and_(_D.c.pipeline == bindparam("pipeline"), _D.c.key == any_(bindparam("keys", type_=ARRAY(String))))
)


class Ledger(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, metrics: Metrics) -> None:
        super().__init__(engine, pipeline)
        self._metrics = metrics

    def known_versions(self, keys: Sequence[str]) -> set[tuple[str, str]]:
        """The (key, version) pairs of `keys` already in the ledger."""
        if not keys:
            return set()
        with self.tx() as conn:
            if conn.dialect.name == "postgresql" and self.pipeline is not None:
                # One array parameter instead of a thousand: a listing page costs one cheap round trip.
                rows = conn.execute(_KNOWN_VERSIONS_PG, {"keys": list(keys), "pipeline": self.pipeline})
            else:
                rows = conn.execute(
                    select(_D.c.key, _D.c.version).where(and_(_D.c.key.in_(list(keys)), self.owned(_D)))
                )
            return {(r.key, r.version) for r in rows}

    def record_batch(self, source: str, objects: Sequence[NewObject]) -> dict[str, Any] | None:
        """Record a landing batch and its documents atomically; objects already in the ledger are dropped.

        Returns the batch row, or None when every object was already known (a concurrent sensor won).
        """
        pipeline = self.owner("record a landing batch")
        if not objects:
            return None
        # Two sensors racing may pick the same next seq: the loser's transaction rolls back whole on the unique
        # constraint and is tried again, by then without the objects the winner recorded.
        for attempt in range(5):
            try:
                batch, lags = self._record_batch(pipeline, source, objects)
            except IntegrityError:
                if attempt == 4:
                    raise
                continue
            if lags:
                # After the batch committed, in its own transaction: a metrics failure cannot undo the batch.
                labels = canonical_labels({"pipeline": pipeline})
                self._metrics.record([histogram(LANDING_LAG, labels, LANDING_LAG_BOUNDS, lags)])
            return batch
        return None  # pragma: no cover

    def _record_batch(
        self, pipeline: str, source: str, objects: Sequence[NewObject]
    ) -> tuple[dict[str, Any] | None, list[float]]:
        """The batch row (None when every object was known) and the landing lag of each object it recorded."""
        lb = t.landing_batches
        now = utcnow()
        lags: list[float] = []
        with self.tx() as conn:
            seq = (conn.execute(select(func.max(lb.c.seq)).where(lb.c.pipeline == pipeline)).scalar() or 0) + 1
            batch_id = f"{now:%Y%m%dT%H%M%S}-{seq:06d}-{secrets.token_hex(3)}"
            conn.execute(
                insert(lb).values(
                    id=batch_id,
                    pipeline=pipeline,
                    seq=seq,
                    source=source,
                    created_at=now,
                    n_objects=0,
                    status="pending",
                )
            )
            stmt = upsert(_D, conn).on_conflict_do_nothing()
            inserted = 0
            for obj in objects:
                res = conn.execute(
                    stmt.values(
                        pipeline=pipeline,
                        key=obj.key,
                        version=obj.version,
                        batch_id=batch_id,
                        size=obj.size,
                        last_modified=obj.last_modified,
                        status="pending",
                    )
                )
                inserted += res.rowcount or 0
                if res.rowcount and obj.last_modified is not None:
                    # A last_modified ahead of our clock (skew) is no lag, not a negative one.
                    lags.append(max((now - obj.last_modified).total_seconds(), 0.0))
            if inserted == 0:
                conn.rollback()
                return None, []
            conn.execute(update(lb).where(lb.c.id == batch_id).values(n_objects=inserted))
            return dict(conn.execute(select(lb).where(lb.c.id == batch_id)).one()._mapping), lags

    def batches(self, status: str | None = None) -> list[dict[str, Any]]:
        lb = t.landing_batches
        q = select(lb).where(self.owned(lb)).order_by(lb.c.pipeline, lb.c.seq)
        if status:
            q = q.where(lb.c.status == status)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def get_batch(self, batch_id: str) -> dict[str, Any] | None:
        lb = t.landing_batches
        with self.tx() as conn:
            return row_dict(conn.execute(select(lb).where(and_(lb.c.id == batch_id, self.owned(lb)))).first())

    def mark_batch(self, batch_id: str, status: str, *, run_id: str | None = None) -> None:
        lb = t.landing_batches
        values: dict[str, Any] = {"status": status}
        if run_id:
            values["run_id"] = run_id
        if status == "ingested":
            values["ingested_at"] = utcnow()
        cond = and_(lb.c.id == batch_id, lb.c.pipeline == self.owner("mark a landing batch"))
        with self.tx() as conn:
            conn.execute(update(lb).where(cond).values(**values))

    def corpus_revision(self) -> int:
        """The sequence number of the newest ingested batch: a cheap watermark of the corpus state."""
        lb = t.landing_batches
        with self.tx() as conn:
            q = select(func.max(lb.c.seq)).where(and_(lb.c.status == "ingested", self.owned(lb)))
            return conn.execute(q).scalar() or 0
