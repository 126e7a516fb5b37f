"""The state store's side of the metrics: durable series (`metric_series`) and the aggregates /metrics derives.

Writes: `add_metric_deltas` adds counts, sums and cumulative buckets to their rows in one transaction. A counter
is one UPSERT (`count`/`sum` incremented in the statement, so concurrent writers cannot lose an increment). A
histogram's buckets are a JSON map, which SQL cannot add up portably, so its row is created if missing, then
read under `SELECT ... FOR UPDATE` and written back: concurrent writers of one series queue on the row lock
(SQLite: the store's BEGIN IMMEDIATE already serialises writers). Rows are locked in (name, labels) order, so
two transactions touching the same series cannot deadlock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Float, and_, case, cast, func, literal, select, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.sql import utcnow

if TYPE_CHECKING:
    from runtime_ops.observability.metrics import SeriesDelta


@dataclass
class HistogramData:
    count: int = 0
    sum: float = 0.0
    buckets: dict[str, int] = field(default_factory=dict)


@dataclass
class StoreAggregates:
    """What /metrics derives from the state store's own rows at scrape time."""

    approvals_pending: int
    approval_oldest_pending_age_s: float
    approval_escalations: int
    approval_expiries: int
    decision_latency: dict[str, HistogramData]  # by outcome
    quarantined: dict[str, int]  # by quarantine code
    landing_oldest_pending_age_s: float


def _upsert(conn: Connection) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def _seconds_between(conn: Connection, start: Any, end: Any) -> Any:
    """`end - start` in seconds, in SQL."""
    if conn.dialect.name == "postgresql":
        return func.extract("epoch", end - start)
    return (func.julianday(end) - func.julianday(start)) * 86400.0


class MetricsMixin:
    @contextlib.contextmanager
    def tx(self) -> Iterator[Connection]:  # provided by StateStore
        raise NotImplementedError
        yield  # pragma: no cover

    # ------------------------------------------------------------------ durable series
    def add_metric_deltas(self, deltas: Sequence[SeriesDelta]) -> None:
        """Add every delta to its series in one transaction."""
        from runtime_ops.observability.metrics import merge_buckets

        ms = t.metric_series
        now = utcnow()
        with self.tx() as conn:
            insert = _upsert(conn)
            for d in sorted(deltas, key=lambda d: (d.name, d.labels)):
                if d.kind == "counter":
                    stmt = insert(ms).values(
                        name=d.name,
                        labels=d.labels,
                        kind=d.kind,
                        count=d.count,
                        sum=d.sum,
                        buckets=None,
                        updated_at=now,
                    )
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
                    insert(ms)
                    .values(name=d.name, labels=d.labels, kind=d.kind, count=0, sum=0.0, buckets={}, updated_at=now)
                    .on_conflict_do_nothing()
                )
                key = and_(ms.c.name == d.name, ms.c.labels == d.labels)
                row = conn.execute(select(ms.c.count, ms.c.sum, ms.c.buckets).where(key).with_for_update()).one()
                conn.execute(
                    update(ms)
                    .where(key)
                    .values(
                        count=row.count + d.count,
                        sum=row.sum + d.sum,
                        buckets=merge_buckets(row.buckets, d.buckets),
                        updated_at=now,
                    )
                )

    def metric_rows(self) -> list[dict[str, Any]]:
        ms = t.metric_series
        with self.tx() as conn:
            q = select(ms.c.name, ms.c.labels, ms.c.kind, ms.c.count, ms.c.sum, ms.c.buckets)
            return [dict(r._mapping) for r in conn.execute(q.order_by(ms.c.name, ms.c.labels))]

    # ------------------------------------------------------------------ scrape-time aggregates
    def metric_aggregates(self, now: datetime, decision_bounds: Sequence[float]) -> StoreAggregates:
        """Approval, quarantine and landing figures in one read transaction, each an SQL aggregate (no row is
        loaded into Python: the cost stays flat as the tables grow, given the status indexes)."""
        from runtime_ops.observability.metrics import le_label

        ar, docs, lb = t.approval_requests, t.documents, t.landing_batches
        with self.tx() as conn:
            pending = conn.execute(
                select(func.count(), func.min(ar.c.created_at)).where(ar.c.status == "pending")
            ).one()
            escalations = conn.execute(select(func.count()).where(ar.c.escalated_at.is_not(None))).scalar_one()
            expiries = conn.execute(select(func.count()).where(ar.c.status == "expired")).scalar_one()

            latency = cast(_seconds_between(conn, ar.c.created_at, ar.c.decided_at), Float)
            # A decision recorded a hair before its creation (clock steps) counts as instant, not negative.
            latency = case((latency < 0, literal(0.0)), else_=latency)
            bounds = sorted(float(b) for b in decision_bounds)
            cols = [func.sum(case((latency <= b, 1), else_=0)).label(f"b{i}") for i, b in enumerate(bounds)]
            rows = conn.execute(
                select(ar.c.status, func.count().label("n"), func.sum(latency).label("total"), *cols)
                .where(and_(ar.c.decided_at.is_not(None), ar.c.status != "pending"))
                .group_by(ar.c.status)
            ).all()
            decision: dict[str, HistogramData] = {}
            for r in rows:
                buckets = {le_label(b): int(getattr(r, f"b{i}") or 0) for i, b in enumerate(bounds)}
                buckets["+Inf"] = int(r.n)
                decision[str(r.status)] = HistogramData(int(r.n), float(r.total or 0.0), buckets)

            quarantined = {
                str(code or "unknown"): int(n)
                for code, n in conn.execute(
                    select(docs.c.quarantine_code, func.count())
                    .where(docs.c.status == "quarantined")
                    .group_by(docs.c.quarantine_code)
                )
            }
            oldest_batch = conn.execute(
                select(func.min(lb.c.created_at)).where(lb.c.status.in_(("pending", "launched")))
            ).scalar()

        def age(since: datetime | None) -> float:
            return max((now - since).total_seconds(), 0.0) if since is not None else 0.0

        return StoreAggregates(
            approvals_pending=int(pending[0]),
            approval_oldest_pending_age_s=age(pending[1]),
            approval_escalations=int(escalations),
            approval_expiries=int(expiries),
            decision_latency=decision,
            quarantined=quarantined,
            landing_oldest_pending_age_s=age(oldest_batch),
        )
