"""The query log and the feedback on it: records (each with the items it showed, one JSON list) written in batches,
read back by request id, feedback inserted once per (request, chunk, signal), and retention by age.

The ops API serves every pipeline and writes their records together (`record`: one transaction per batch, each
record with all its shown items or not at all), so writes are allowed on an unscoped store; a scoped store refuses
another pipeline's records and reads only its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select

from runtime_ops.online.evidence import POSITIVE_SIGNALS, OnlineInputs
from runtime_ops.online.query_records import QueryRecord
from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert
from runtime_ops.store.scope import Repository

_Q, _F = t.query_records, t.feedback


@dataclass(frozen=True)
class LoggedRequest:
    """A request as the query log holds it: its record's columns and the items it showed, in rank order."""

    record: dict[str, Any]

    @property
    def items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.record["items"]
        return items

    def item(self, chunk_id: int) -> dict[str, Any] | None:
        return next((i for i in self.items if i["chunk_id"] == chunk_id), None)


def _row(r: QueryRecord) -> dict[str, Any]:
    return {
        "request_id": r.request_id,
        "pipeline": r.pipeline,
        "route": r.route,
        "arm": r.arm,
        "session_hash": r.session_hash,
        "query_text": r.query_text,
        "query_hash": r.query_hash,
        "k": r.k,
        "created_at": r.created_at,
        "latency_ms": r.latency_ms,
        "n_results": r.n_results,
        "production_version": r.production_version,
        "production_index": r.production_index,
        "candidate_version": r.candidate_version,
        "candidate_index": r.candidate_index,
        "rollout_id": r.rollout_id,
        "items": [
            {
                "rank": i.rank,
                "chunk_id": i.chunk_id,
                "document_id": i.document_id,
                "document_key": i.document_key,
                "team": i.team,
            }
            for i in r.items
        ],
    }


class QueryLog(Repository):
    def record(self, records: Sequence[QueryRecord]) -> None:
        """Write `records`, each with its shown items, in one transaction: all of them or none."""
        if not records:
            return
        foreign = {r.pipeline for r in records} - {self.pipeline} if self.pipeline is not None else set()
        if foreign:
            raise ValueError(f"query records of {sorted(foreign)} given to pipeline {self.pipeline!r}'s query log")
        with self.tx() as conn:
            conn.execute(insert(_Q), [_row(r) for r in records])

    def get(self, request_id: str) -> LoggedRequest | None:
        """The logged request (a standalone read: on SQLite it takes no write lock and waits for no writer)."""
        rows = self.fetch(select(_Q).where(_Q.c.request_id == request_id, self.owned(_Q)))
        return LoggedRequest(dict(rows[0]._mapping)) if rows else None

    def add_feedback(
        self, request_id: str, chunk_id: int, signal: str, value: float | None, key_id: str, now: datetime
    ) -> bool:
        """Record one piece of feedback; False (and nothing written) when the same (request, chunk, signal) was
        recorded before."""
        row = {"request_id": request_id, "chunk_id": chunk_id, "signal": signal, "value": value,
               "key_id": key_id, "created_at": now}  # fmt: skip
        with self.tx() as conn:
            stmt = (
                upsert(_F, conn)
                .values(**row)
                .on_conflict_do_nothing(index_elements=["request_id", "chunk_id", "signal"])
            )
            return conn.execute(stmt).rowcount == 1

    def feedback_for(self, request_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_F).join(_Q, _Q.c.request_id == _F.c.request_id).where(_F.c.request_id == request_id)
            return [dict(r._mapping) for r in conn.execute(q.where(self.owned(_Q)).order_by(_F.c.id))]

    def online_inputs(self, rollout_id: int) -> OnlineInputs:
        """Rollout `rollout_id`'s requests per arm (candidate, production) and those with a positive signal."""
        positive = (
            select(_F.c.request_id)
            .where(_F.c.request_id == _Q.c.request_id, _F.c.signal.in_(POSITIVE_SIGNALS))
            .exists()
        )
        with self.tx() as conn:
            q = (
                select(_Q.c.arm, func.count(), func.count().filter(positive))
                .where(_Q.c.rollout_id == rollout_id, self.owned(_Q))
                .group_by(_Q.c.arm)
            )
            by_arm = {arm: (int(n), int(p)) for arm, n, p in conn.execute(q)}
        c, p = by_arm.get("candidate", (0, 0)), by_arm.get("production", (0, 0))
        return OnlineInputs(rollout_id, c[0], c[1], p[0], p[1])

    def counts(self) -> dict[str, int]:
        """Rows in this scope: records, feedback."""
        with self.tx() as conn:
            ids = select(_Q.c.request_id).where(self.owned(_Q))
            return {
                "records": conn.execute(select(func.count()).select_from(_Q).where(self.owned(_Q))).scalar_one(),
                "feedback": conn.execute(select(func.count()).where(_F.c.request_id.in_(ids))).scalar_one(),
            }

    def delete_before(self, cutoff: datetime, *, batch: int = 1000) -> int:
        """Delete this scope's records older than `cutoff` with their feedback, `batch` records per
        transaction (a long purge never holds one long lock); the number of records deleted."""
        deleted = 0
        while True:
            with self.tx() as conn:
                old = conn.execute(
                    select(_Q.c.request_id).where(self.owned(_Q), _Q.c.created_at < cutoff).limit(batch)
                ).scalars().all()  # fmt: skip
                if not old:
                    return deleted
                conn.execute(delete(_F).where(_F.c.request_id.in_(old)))
                conn.execute(delete(_Q).where(_Q.c.request_id.in_(old)))
            deleted += len(old)
