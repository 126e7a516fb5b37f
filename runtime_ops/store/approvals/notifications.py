"""Notification bookkeeping of a pipeline's approval requests: which to announce or re-sync, what was posted
where (Slack channel, ts, shown status), escalation notices, and the promotion runs approvals launched."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, select, update

from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.approvals.requests import OPEN
from runtime_ops.store.scope import Repository

_R = t.approval_requests


class Notifications(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, audit: Audit) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit

    def _mine(self, request_id: str, what: str) -> Any:
        return and_(_R.c.id == request_id, _R.c.pipeline == self.owner(what))

    # ------------------------------------------------------------------ announcements
    def requests_to_notify(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_R).where(
                and_(
                    self.owned(_R),
                    _R.c.kind == "human",
                    _R.c.notified_at.is_(None),
                    _R.c.status == OPEN,
                )
            )
            return [dict(r._mapping) for r in conn.execute(q.order_by(_R.c.created_at))]

    def requests_with_messages(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_R).where(and_(_R.c.slack_ts.is_not(None), self.owned(_R)))
            return [dict(r._mapping) for r in conn.execute(q.order_by(_R.c.created_at))]

    def escalations_to_notify(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_R).where(
                and_(
                    self.owned(_R),
                    _R.c.escalated_at.is_not(None),
                    _R.c.escalation_notified_at.is_(None),
                    _R.c.status == OPEN,
                )
            )
            return [dict(r._mapping) for r in conn.execute(q)]

    def mark_notified(
        self,
        request_id: str,
        *,
        now: datetime,
        channel: str,
        slack_channel: str | None = None,
        slack_ts: str | None = None,
        slack_status: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> bool:
        """Record that a request was announced; False when another process recorded it first."""
        mine = self._mine(request_id, "mark a request notified")
        with self.tx() as conn:
            res = conn.execute(
                update(_R)
                .where(and_(mine, _R.c.notified_at.is_(None)))
                .values(notified_at=now, slack_channel=slack_channel, slack_ts=slack_ts, slack_status=slack_status)
            )
            if res.rowcount:
                self._audit.append_in(
                    conn,
                    event="notified",
                    request_id=request_id,
                    channel=channel,
                    outcome="sent",
                    detail=detail or {},
                    now=now,
                )
            return bool(res.rowcount)

    def mark_escalation_notified(
        self, request_id: str, *, now: datetime, channel: str, detail: dict[str, Any] | None = None
    ) -> None:
        mine = self._mine(request_id, "mark an escalation notified")
        with self.tx() as conn:
            res = conn.execute(
                update(_R).where(and_(mine, _R.c.escalation_notified_at.is_(None))).values(escalation_notified_at=now)
            )
            if res.rowcount:
                self._audit.append_in(
                    conn,
                    event="escalation_notified",
                    request_id=request_id,
                    channel=channel,
                    outcome="sent",
                    detail=detail or {},
                    now=now,
                )

    def set_slack_status(self, request_id: str, slack_status: str) -> None:
        mine = self._mine(request_id, "set a Slack status")
        with self.tx() as conn:
            conn.execute(update(_R).where(mine).values(slack_status=slack_status))

    # ------------------------------------------------------------------ promotion runs
    def approved_unlaunched(self, kinds: tuple[str, ...] = ("human",)) -> list[dict[str, Any]]:
        """Approvals (by a person; `policy` too for an asset gate, whose run follows any approval) whose run has
        not been recorded yet."""
        with self.tx() as conn:
            q = select(_R).where(
                and_(
                    self.owned(_R),
                    _R.c.status == "approved",
                    _R.c.kind.in_(kinds),
                    _R.c.promotion_run_id.is_(None),
                )
            )
            return [dict(r._mapping) for r in conn.execute(q.order_by(_R.c.decided_at))]

    def mark_request_launched(self, request_id: str, run_id: str) -> None:
        mine = self._mine(request_id, "mark a request launched")
        with self.tx() as conn:
            conn.execute(update(_R).where(mine).values(promotion_run_id=run_id))
