"""Durable metric series (`metric_series`) and the aggregates /metrics derives from the store's rows.

Writes: `add_metric_deltas` adds counts, sums and cumulative buckets to their rows in one transaction. A counter
is one UPSERT (`count`/`sum` incremented in the statement, so concurrent writers cannot lose an increment). A
histogram's buckets are a JSON map, which SQL cannot add up portably, so its row is created if missing, then
read under `SELECT ... FOR UPDATE` and written back: concurrent writers of one series queue on the row lock
(SQLite: the store's BEGIN IMMEDIATE already serialises writers). Rows are locked in (name, labels) order, so
two transactions touching the same series cannot deadlock. Series are process-wide; a `pipeline` label says
whose they are.

Reads: `metric_aggregates` computes the approval, quarantine and landing figures per pipeline (the scope's, or
every pipeline's on an unscoped store).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Float, and_, case, cast, func, literal, select, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.operations.series import (
    WRITE_ERRORS,
    HistogramData,
    SeriesDelta,
    canonical_labels,
    counter,
    le_label,
    merge_buckets,
    note_write_error,
)
from runtime_ops.store.scope import DEFAULT_PIPELINE, Repository

log = logging.getLogger("runtime_ops.metrics")


@dataclass
class StoreAggregates:
    """What /metrics derives from one pipeline's rows at scrape time."""

    approvals_pending: int = 0
    approval_oldest_pending_age_s: float = 0.0
    approval_escalations: int = 0
    approval_expiries: int = 0
    decision_latency: dict[str, HistogramData] | None = None  # by outcome
    quarantined: dict[str, int] | None = None  # by quarantine code
    landing_oldest_pending_age_s: float = 0.0


def _seconds_between(conn: Connection, start: Any, end: Any) -> Any:
    """`end - start` in seconds, in SQL."""
    if conn.dialect.name == "postgresql":
        return func.extract("epoch", end - start)
    return (func.julianday(end) - func.julianday(start)) * 86400.0


class Metrics(Repository):
    # ------------------------------------------------------------------ durable series
    def add_metric_deltas(self, deltas: Sequence[SeriesDelta]) -> None:
        """Add every delta to its series in one transaction."""
        ms = t.metric_series
        now = utcnow()
        with self.tx() as conn:
            for d in sorted(deltas, key=lambda d: (d.name, d.labels)):
                if d.kind == "counter":
                    values = {"name": d.name, "labels": d.labels, "kind": d.kind, "count": d.count, "sum": d.sum}
                    stmt = upsert(ms, conn).values(**values, buckets=None, updated_at=now)
                    conn.execute(
                        stmt.on_conflict_do_update(
                            index_elements=[ms.c.name, ms.c.labels],
                            set_={
                                "count": ms.c.count + stmt.excluded.count,
                                "sum": ms.c.sum + stmt.excluded.sum,
                                "updated_at": stmt.excluded.updated_at,
                            },
                        )
                    )
                    continue
                conn.execute(
                    upsert(ms, conn)
                    .values(name=d.name, labels=d.labels, kind=d.kind, count=0, sum=0.0, buckets={}, updated_at=now)
                    .on_conflict_do_nothing()
                )
                key = and_(ms.c.name == d.name, ms.c.labels == d.labels)
                row = conn.execute(select(ms.c.count, ms.c.sum, ms.c.buckets).where(key).with_for_update()).one()
                conn.execute(
                    update(ms)
                    .where(key)
                    .values(
                        count=row._mapping["count"] + d.count,  # row.count is the tuple method to the checker
                        sum=row.sum + d.sum,
                        buckets=merge_buckets(row.buckets, d.buckets),
                        updated_at=now,
                    )
                )

    def record(self, deltas: Sequence[SeriesDelta]) -> bool:
        """Add `deltas` in one transaction. Never raises: a failure is logged and counted (in this process, and
        durably when the store still takes a counter); False when nothing was written."""
        if not deltas:
            return False
        try:
            self.add_metric_deltas(deltas)
        except Exception as exc:  # an observation must never fail the work it observes
            for name in sorted({d.name for d in deltas}):
                self.failed(name, exc)
            return False
        return True

    def failed(self, name: str, exc: BaseException | None) -> None:
        """Count an observation of `name` that could not be written."""
        note_write_error(name)
        log.warning("metric %s not recorded (%s: %s); the observed work goes on", name, type(exc).__name__, exc)
        if name == WRITE_ERRORS:
            return
        # Best effort: the store may still take a counter (the failure was a bad label, say); when it is down this
        # fails fast too and is dropped.
        with contextlib.suppress(Exception):
            self.add_metric_deltas([counter(WRITE_ERRORS, canonical_labels({"metric": name}))])

    def metric_rows(self) -> list[dict[str, Any]]:
        ms = t.metric_series
        with self.tx() as conn:
            q = select(ms.c.name, ms.c.labels, ms.c.kind, ms.c.count, ms.c.sum, ms.c.buckets)
            return [dict(r._mapping) for r in conn.execute(q.order_by(ms.c.name, ms.c.labels))]

    # ------------------------------------------------------------------ scrape-time aggregates
    def metric_aggregates(self, now: datetime, decision_bounds: Sequence[float]) -> dict[str, StoreAggregates]:
        """Approval, quarantine and landing figures by pipeline, in one read transaction, each an SQL aggregate
        grouped by pipeline (no row is loaded into Python: the cost stays flat as the tables grow)."""
        ar, docs, lb = t.approval_requests, t.documents, t.landing_batches
        out: dict[str, StoreAggregates] = {}

        def agg(pipeline: str) -> StoreAggregates:
            a = out.get(pipeline)
            if a is None:
                a = out[pipeline] = StoreAggregates(decision_latency={}, quarantined={})
            return a

        def age(since: datetime | None) -> float:
            return max((now - since).total_seconds(), 0.0) if since is not None else 0.0

        if self.pipeline is not None:
            agg(self.pipeline)
        with self.tx() as conn:
            if self.pipeline is None:  # every known pipeline shows, zeros included (batches, requests: small tables)
                known = select(lb.c.pipeline).union(select(ar.c.pipeline))
                for (p,) in conn.execute(known):
                    agg(p)
            for p, n, oldest in conn.execute(
                select(ar.c.pipeline, func.count(), func.min(ar.c.created_at))
                .where(and_(ar.c.status == "pending", self.owned(ar)))
                .group_by(ar.c.pipeline)
            ):
                agg(p).approvals_pending, agg(p).approval_oldest_pending_age_s = int(n), age(oldest)
            for p, n in conn.execute(
                select(ar.c.pipeline, func.count())
                .where(and_(ar.c.escalated_at.is_not(None), self.owned(ar)))
                .group_by(ar.c.pipeline)
            ):
                agg(p).approval_escalations = int(n)
            for p, n in conn.execute(
                select(ar.c.pipeline, func.count())
                .where(and_(ar.c.status == "expired", self.owned(ar)))
                .group_by(ar.c.pipeline)
            ):
                agg(p).approval_expiries = int(n)

            latency = cast(_seconds_between(conn, ar.c.created_at, ar.c.decided_at), Float)
            # A decision recorded a hair before its creation (clock steps) counts as instant, not negative.
            latency = case((latency < 0, literal(0.0)), else_=latency)
            bounds = sorted(float(b) for b in decision_bounds)
            cols = [func.sum(case((latency <= b, 1), else_=0)).label(f"b{i}") for i, b in enumerate(bounds)]
            rows = conn.execute(
                select(ar.c.pipeline, ar.c.status, func.count().label("n"), func.sum(latency).label("total"), *cols)
                .where(and_(ar.c.decided_at.is_not(None), ar.c.status != "pending", self.owned(ar)))
                .group_by(ar.c.pipeline, ar.c.status)
            ).all()
            for r in rows:
                buckets = {le_label(b): int(getattr(r, f"b{i}") or 0) for i, b in enumerate(bounds)}
                buckets["+Inf"] = int(r.n)
                agg(r.pipeline).decision_latency[str(r.status)] = HistogramData(  # type: ignore[index]
                    int(r.n), float(r.total or 0.0), buckets
                )

            for p, code, n in conn.execute(
                select(docs.c.pipeline, docs.c.quarantine_code, func.count())
                .where(and_(docs.c.status == "quarantined", self.owned(docs)))
                .group_by(docs.c.pipeline, docs.c.quarantine_code)
            ):
                agg(p).quarantined[str(code or "unknown")] = int(n)  # type: ignore[index]
            for p, oldest in conn.execute(
                select(lb.c.pipeline, func.min(lb.c.created_at))
                # A failed batch is not ingested either: it keeps the age growing until it is (batch_runs.py).
                .where(and_(lb.c.status.in_(("pending", "launched", "failed")), self.owned(lb)))
                .group_by(lb.c.pipeline)
            ):
                agg(p).landing_oldest_pending_age_s = age(oldest)
            if not out:  # nothing recorded yet: the families still show (zeros) for the default pipeline
                agg(DEFAULT_PIPELINE)
        return out
