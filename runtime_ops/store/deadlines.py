"""Approval deadlines of a pipeline: expiry (fail closed), escalation, and the compensation of requests that
ended without approval, each exactly once and audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, select, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.audit import Audit
from runtime_ops.store.requests import OPEN
from runtime_ops.store.scope import Repository

_R = t.approval_requests


class Deadlines(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, audit: Audit) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit

    def _expire_locked(self, conn: Connection, request: dict[str, Any], now: datetime) -> bool:
        res = conn.execute(
            update(_R)
            .where(and_(_R.c.id == request["id"], _R.c.status == OPEN))
            .values(
                status="expired",
                decided_at=now,
                decided_by="deadline",
                decision_reason="expired without a decision: rejected (fail closed)",
            )
        )
        if res.rowcount:
            self._audit.append_in(
                conn,
                event="expired",
                request_id=request["id"],
                channel="deadline",
                outcome="expired",
                detail={"expire_at": request["expire_at"].isoformat() if request.get("expire_at") else None},
                now=now,
            )
        return bool(res.rowcount)

    def expire_due(self, now: datetime) -> list[str]:
        """Expire every pending request past its deadline; returns their ids."""
        expired = []
        with self.tx() as conn:
            due = conn.execute(
                select(_R)
                .where(and_(_R.c.pipeline == self.owner("expire requests"), _R.c.status == OPEN, _R.c.expire_at <= now))
                .with_for_update()
            ).all()
            for row in due:
                if self._expire_locked(conn, dict(row._mapping), now):
                    expired.append(row.id)
        return expired

    def escalate_due(self, now: datetime) -> list[str]:
        """Mark pending requests past their escalation deadline as escalated (once); returns their ids."""
        escalated = []
        with self.tx() as conn:
            due = conn.execute(
                select(_R.c.id, _R.c.escalation_approvers)
                .where(
                    and_(
                        _R.c.pipeline == self.owner("escalate requests"),
                        _R.c.status == OPEN,
                        _R.c.escalated_at.is_(None),
                        _R.c.escalate_at <= now,
                    )
                )
                .with_for_update()
            ).all()
            for row in due:
                conn.execute(update(_R).where(_R.c.id == row.id).values(escalated_at=now))
                self._audit.append_in(
                    conn,
                    event="escalated",
                    request_id=row.id,
                    channel="deadline",
                    outcome="escalated",
                    detail={"escalation_approvers": row.escalation_approvers or []},
                    now=now,
                )
                escalated.append(row.id)
        return escalated

    def compensate_due(self, compensations: dict[str, Any], now: datetime) -> list[tuple[str, str]]:
        """Run each registered compensation of an expired or rejected request exactly once.

        The compensation runs inside the transaction that claims it, so it is applied together with its
        claim and its audit record, or not at all.
        """
        done = []
        with self.tx() as conn:
            due = conn.execute(
                select(_R)
                .where(
                    and_(
                        _R.c.pipeline == self.owner("compensate requests"),
                        _R.c.status.in_(["expired", "rejected"]),
                        _R.c.compensation.is_not(None),
                        _R.c.compensated_at.is_(None),
                    )
                )
                .with_for_update()
            ).all()
            for row in due:
                request = dict(row._mapping)
                fn = compensations.get(request["compensation"])
                if fn is None:
                    detail = {"error": f"no compensation named {request['compensation']!r} is registered"}
                    outcome = "missing"
                else:
                    detail = fn(conn, request, now) or {}
                    outcome = "done"
                conn.execute(update(_R).where(_R.c.id == request["id"]).values(compensated_at=now))
                self._audit.append_in(
                    conn,
                    event="compensated",
                    request_id=request["id"],
                    channel="deadline",
                    outcome=outcome,
                    detail={"compensation": request["compensation"], **detail},
                    now=now,
                )
                done.append((request["id"], outcome))
        return done
