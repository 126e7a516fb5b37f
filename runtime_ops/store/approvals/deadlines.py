"""Approval deadlines of a pipeline: expiry (fail closed), escalation, and the compensation of requests that
ended without approval, each exactly once and audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, select, update
from sqlalchemy.engine import Connection

from runtime_ops.policies.approvals import escalations_due, reached_tiers, request_tiers
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.approvals.lifecycle import Lifecycle
from runtime_ops.store.approvals.requests import OPEN
from runtime_ops.store.scope import Repository

_R = t.approval_requests


class Deadlines(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, audit: Audit, lifecycle: Lifecycle) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit
        self._lifecycle = lifecycle

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
            self._lifecycle.follow_status_in(
                conn, request["id"], "expired", actor="deadline", reason="expired without a decision", now=now
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
        """Let in every escalation tier whose deadline passed (each once, in order, in the transaction that records
        it: a restart or a second process finds it done); returns the ids of the requests that escalated."""
        escalated = []
        with self.tx() as conn:
            due = conn.execute(
                select(_R)
                .where(
                    and_(
                        _R.c.pipeline == self.owner("escalate requests"),
                        _R.c.status == OPEN,
                        _R.c.escalate_at <= now,
                    )
                )
                .with_for_update()
            ).all()
            for row in due:
                request = dict(row._mapping)
                tiers = request_tiers(request)
                joining = escalations_due(request, now)
                for index in joining:
                    self._audit.append_in(
                        conn,
                        event="escalated",
                        request_id=row.id,
                        channel="deadline",
                        outcome="escalated",
                        detail={"tier": index + 1, "of": len(tiers), "escalation_approvers": list(tiers[index][0])},
                        now=now,
                    )
                reached = (joining[-1] + 1) if joining else reached_tiers(request)
                following = tiers[reached][1] if reached < len(tiers) else None
                values: dict[str, Any] = {"escalate_at": following}
                if joining:
                    # A new tier is announced to its approvers: the notification mark starts again.
                    values.update(escalated_at=now, escalation_notified_at=None)
                    if request.get("escalation_tiers"):
                        values["escalation_tier"] = reached
                    escalated.append(row.id)
                conn.execute(update(_R).where(_R.c.id == row.id).values(**values))
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
