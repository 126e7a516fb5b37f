"""Drift signals of embedded landing batches and retrain requests: what the corpus sensor's retrain policy reads."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, insert, select, update

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository, row_dict

_S, _R = t.drift_signals, t.retrain_requests
REQUEST_SOURCES = ("alert", "manual")


class Retraining(Repository):
    # ------------------------------------------------------------------ drift signals
    def record_drift_signal(
        self,
        *,
        model_version: int,
        corpus_revision: int,
        chunks: int,
        embedding_shift: float | None,
        oov_rate: float | None,
        centroid_sum: bytes,
        centroid_count: int,
        run_id: str | None = None,
    ) -> int:
        pipeline = self.owner("record a drift signal")
        with self.tx() as conn:
            res = conn.execute(
                insert(_S).values(
                    pipeline=pipeline,
                    model_version=model_version,
                    corpus_revision=corpus_revision,
                    chunks=chunks,
                    embedding_shift=embedding_shift,
                    oov_rate=oov_rate,
                    centroid_sum=centroid_sum,
                    centroid_count=centroid_count,
                    run_id=run_id,
                    created_at=utcnow(),
                )
            )
            assert res.inserted_primary_key is not None
            return int(res.inserted_primary_key[0])

    def latest_centroid(self, model_version: int) -> tuple[bytes, int] | None:
        """(sum of vectors, count) of `model_version`'s running centroid after its newest signal, or None."""
        with self.tx() as conn:
            row = conn.execute(
                select(_S.c.centroid_sum, _S.c.centroid_count)
                .where(and_(_S.c.model_version == model_version, self.versioned(_S)))
                .order_by(_S.c.id.desc())
                .limit(1)
            ).first()
            return (bytes(row.centroid_sum), int(row.centroid_count)) if row is not None else None

    def drift_signals(self, *, after_revision: int = 0) -> list[dict[str, Any]]:
        """Signals of batches embedded at a corpus revision above `after_revision`, oldest first."""
        cols = [c for c in _S.c if c.name != "centroid_sum"]
        with self.tx() as conn:
            rows = conn.execute(
                select(*cols).where(and_(_S.c.corpus_revision > after_revision, self.owned(_S))).order_by(_S.c.id)
            ).all()
            return [dict(r._mapping) for r in rows]

    def max_drift_since(self, revision: int, *, min_chunks: int = 1) -> dict[str, Any]:
        """The largest embedding shift and OOV rate of batches of at least `min_chunks` chunks embedded after
        corpus `revision`, each with the (earliest) batch revision it came from: {max_embedding_shift,
        shift_revision, max_oov_rate, oov_revision}."""
        out: dict[str, Any] = {}
        for column, value, at in (
            (_S.c.embedding_shift, "max_embedding_shift", "shift_revision"),
            (_S.c.oov_rate, "max_oov_rate", "oov_revision"),
        ):
            cond = and_(_S.c.corpus_revision > revision, _S.c.chunks >= min_chunks, column.is_not(None), self.owned(_S))
            with self.tx() as conn:
                row = conn.execute(
                    select(column, _S.c.corpus_revision)
                    .where(cond)
                    .order_by(column.desc(), _S.c.corpus_revision)
                    .limit(1)
                ).first()
            out[value] = float(row[0]) if row is not None else None
            out[at] = int(row[1]) if row is not None else None
        return out

    # ------------------------------------------------------------------ retrain requests
    def request_retrain(
        self, *, source: str, reason: str, corpus_revision: int, requested_by: str | None = None
    ) -> int:
        """Record a retrain request (`alert` or `manual`); the corpus sensor consumes it once. Returns its id."""
        if source not in REQUEST_SOURCES:
            raise ValueError(f"a retrain request's source is one of {REQUEST_SOURCES}, got {source!r}")
        pipeline = self.owner("request a retrain")
        with self.tx() as conn:
            res = conn.execute(
                insert(_R).values(
                    pipeline=pipeline,
                    source=source,
                    reason=reason,
                    requested_by=requested_by,
                    corpus_revision=corpus_revision,
                    status="pending",
                    created_at=utcnow(),
                )
            )
            assert res.inserted_primary_key is not None
            return int(res.inserted_primary_key[0])

    def pending_request(self, *, sources: tuple[str, ...] = REQUEST_SOURCES) -> dict[str, Any] | None:
        """The oldest pending request from one of `sources`."""
        cond = and_(_R.c.status == "pending", _R.c.source.in_(sources), self.owned(_R))
        with self.tx() as conn:
            return row_dict(conn.execute(select(_R).where(cond).order_by(_R.c.id).limit(1)).first())

    def consume_request(self, request_id: int, run_key: str) -> bool:
        """Mark a pending request as requested with `run_key` (compare-and-set: True for exactly one caller)."""
        cond = and_(_R.c.id == request_id, _R.c.status == "pending", _R.c.pipeline == self.owner("consume a request"))
        with self.tx() as conn:
            res = conn.execute(update(_R).where(cond).values(status="requested", run_key=run_key, handled_at=utcnow()))
            return bool(res.rowcount)

    def request_for_run(self, run_key: str) -> dict[str, Any] | None:
        """The request consumed with `run_key` (the run it launched), if any."""
        cond = and_(_R.c.run_key == run_key, self.owned(_R))
        with self.tx() as conn:
            return row_dict(conn.execute(select(_R).where(cond).order_by(_R.c.id).limit(1)).first())

    def retrain_requests(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(select(_R).where(self.owned(_R)).order_by(_R.c.id))]
