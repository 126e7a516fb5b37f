"""The alert inbox (Alertmanager webhooks) and what the alert sensor did about each alert.

The inbox is process-wide (one Alertmanager webhook); each row carries the pipeline its alert targets (the
alert's `pipeline` label, else the recording store's pipeline, else the default one), and each pipeline's alert
sensor reads and acts on its own rows. An alert firing period is one row, keyed by (fingerprint, startsAt): a
redelivery or a repeat notification is a no-op, `resolved` closes the row, and a later `firing` for the same key
(Alertmanager re-opens an alert it had resolved on a timeout) marks it firing again. A whole webhook payload is
recorded in one transaction.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, func, select, update

from runtime_ops.faults import failpoint
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.requests import Requests, new_request_id
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import DEFAULT_PIPELINE, Repository, row_dict

# A remediation in one of these states is still under way: the same fingerprint launches nothing more.
ACTIVE_ACTION_STATUSES = ("requested", "launched", "awaiting_approval")
# States that count as a launch of the rule, for its cooldown.
LAUNCHED_ACTION_STATUSES = ("requested", "launched", "succeeded", "failed", "awaiting_approval")
# `promotion_run_id` of a rollback approval request: the alert sensor (not the approvals sensor) launches its
# run, and replaces this marker with the run id once the run exists.
ALERT_SENSOR_LAUNCHES = "alert_sensor"


def rollback_digest(alert_key: str, from_version: int, to_version: int) -> str:
    """What a rollback approval decides: this alert's move of `production` from one version to another."""
    return hashlib.sha256(f"rollback|{alert_key}|v{from_version}->v{to_version}".encode()).hexdigest()


def alert_requester(alert: dict[str, Any]) -> str:
    """Who an alert's remediation is requested by: the alert rule, through Alertmanager's authenticated webhook."""
    return f"alertmanager:{alert['alertname'] or alert['fingerprint']}"[:256]


class Alerts(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, requests: Requests) -> None:
        super().__init__(engine, pipeline)
        self._requests = requests

    # ------------------------------------------------------------------ the inbox (webhook side)
    def record_alerts(
        self,
        alerts: Sequence[dict[str, Any]],
        *,
        receiver: str | None = None,
        group_key: str | None = None,
        now: datetime | None = None,
    ) -> dict[str, int]:
        """Record one webhook's alerts (rows from `WebhookAlert.row()`) in one transaction.

        Returns counts of `new`, `resolved` (closed now), `refired` (re-opened) and `duplicate` (no change).
        Nothing is recorded when it raises.
        """
        now = now or utcnow()
        a = t.alerts
        counts: Counter[str] = Counter({"new": 0, "resolved": 0, "refired": 0, "duplicate": 0})
        with self.tx() as conn:
            stmt = upsert(a, conn).on_conflict_do_nothing()
            for i, alert in enumerate(alerts):
                if i:
                    failpoint("alerts.record")  # between two rows of one payload: a test proves atomicity
                resolved = alert["status"] == "resolved"
                pipeline = alert.get("pipeline") or (alert.get("labels") or {}).get("pipeline")
                res = conn.execute(
                    stmt.values(
                        **{**alert, "pipeline": str(pipeline or self.pipeline or DEFAULT_PIPELINE)},
                        receiver=receiver,
                        group_key=group_key,
                        received_at=now,
                        updated_at=now,
                        resolved_at=now if resolved else None,
                    )
                )
                if res.rowcount:
                    counts["new"] += 1
                    continue
                key = and_(a.c.fingerprint == alert["fingerprint"], a.c.starts_at == alert["starts_at"])
                if resolved:
                    changed = conn.execute(
                        update(a)
                        .where(and_(key, a.c.status == "firing"))
                        .values(status="resolved", ends_at=alert["ends_at"], resolved_at=now, updated_at=now)
                    ).rowcount
                    counts["resolved" if changed else "duplicate"] += 1
                else:
                    changed = conn.execute(
                        update(a)
                        .where(and_(key, a.c.status == "resolved"))
                        .values(
                            status="firing",
                            ends_at=None,
                            resolved_at=None,
                            annotations=alert["annotations"],
                            updated_at=now,
                        )
                    ).rowcount
                    counts["refired" if changed else "duplicate"] += 1
        return dict(counts)

    def list_alerts(self, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        q = select(t.alerts).where(self.owned(t.alerts)).order_by(t.alerts.c.id.desc()).limit(limit)
        if status:
            q = q.where(t.alerts.c.status == status)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def get_alert(self, alert_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            q = select(t.alerts).where(and_(t.alerts.c.id == alert_id, self.owned(t.alerts)))
            return row_dict(conn.execute(q).first())

    def alert_for_run(self, run_key: str) -> dict[str, Any] | None:
        """The alert whose remediation run has `run_key`."""
        with self.tx() as conn:
            q = select(t.alerts).where(and_(t.alerts.c.run_key == run_key, self.owned(t.alerts))).limit(1)
            return row_dict(conn.execute(q).first())

    # ------------------------------------------------------------------ remediation (alert sensor side)
    def alerts_to_handle(self, limit: int = 200) -> list[dict[str, Any]]:
        """Alerts the sensor has not decided about yet, oldest first."""
        with self.tx() as conn:
            q = select(t.alerts).where(and_(t.alerts.c.action_status.is_(None), self.owned(t.alerts)))
            q = q.order_by(t.alerts.c.id).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]

    def alerts_in_action(self, *statuses: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.alerts).where(and_(t.alerts.c.action_status.in_(statuses), self.owned(t.alerts)))
            q = q.order_by(t.alerts.c.id)
            return [dict(r._mapping) for r in conn.execute(q)]

    def set_alert_action(self, alert_id: int, *, expect: str | tuple[str, ...] | None = (), **values: Any) -> bool:
        """Update the sensor's columns of one alert; with `expect`, only when action_status is still that
        (compare-and-set: None means "not handled yet"). Returns whether the row changed."""
        a = t.alerts
        cond = and_(a.c.id == alert_id, a.c.pipeline == self.owner("update an alert's action"))
        if expect is None:
            cond = and_(cond, a.c.action_status.is_(None))
        elif isinstance(expect, str):
            cond = and_(cond, a.c.action_status == expect)
        elif expect:
            cond = and_(cond, a.c.action_status.in_(expect))
        with self.tx() as conn:
            return bool(conn.execute(update(a).where(cond).values(**values)).rowcount)

    def active_remediation(
        self, *, fingerprint: str | None = None, action: str | None = None, exclude_id: int | None = None
    ) -> dict[str, Any] | None:
        """An alert whose remediation is still under way (same fingerprint, or same action), if any."""
        a = t.alerts
        cond = and_(a.c.action_status.in_(ACTIVE_ACTION_STATUSES), self.owned(a))
        if fingerprint is not None:
            cond = and_(cond, a.c.fingerprint == fingerprint)
        if action is not None:
            cond = and_(cond, a.c.action == action)
        if exclude_id is not None:
            cond = and_(cond, a.c.id != exclude_id)
        with self.tx() as conn:
            row = conn.execute(select(a).where(cond).order_by(a.c.id).limit(1)).first()
            return dict(row._mapping) if row else None

    def last_rule_launch(self, rule: str) -> datetime | None:
        """When `rule` last launched a remediation (for its cooldown)."""
        a = t.alerts
        with self.tx() as conn:
            return conn.execute(
                select(func.max(a.c.handled_at)).where(
                    and_(a.c.rule == rule, a.c.action_status.in_(LAUNCHED_ACTION_STATUSES), self.owned(a))
                )
            ).scalar()

    # ------------------------------------------------------------------ remediation helpers
    def open_rollback_request(
        self,
        *,
        alert: dict[str, Any],
        from_version: int,
        to_version: int,
        eval_report_id: int,
        policy: Any,
        now: datetime | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Open (once per alert) the human approval request for rolling `production` back.

        `evidence` is what every channel shows of it (`{"rollback": ...}`, `approvals/rollback_facts.py`): the
        alert, the live evidence and the versions, so it reads as a rollback and not as a promotion.

        A `human` request, so the approvals sensor announces, escalates and expires it like any other; unlike a
        candidate's request it supersedes nothing, and its `promotion_run_id` says the alert sensor launches
        the run (the approvals sensor leaves it alone). The decision binds this exact move (from, to, alert).
        """
        now = now or utcnow()
        digest = rollback_digest(alert["run_key"], from_version, to_version)
        r = t.approval_requests
        requested_by = alert_requester(alert)
        request_id = new_request_id(now)
        values: dict[str, Any] = {
            "id": request_id,
            "candidate_version": to_version,
            "candidate_digest": digest,
            "eval_report_id": eval_report_id,
            "kind": "human",
            "status": "pending",
            "requested_by": requested_by,
            "created_at": now,
            "promotion_run_id": ALERT_SENSOR_LAUNCHES,
            "decision_reason": None,
            "evidence": evidence,
            **policy.to_columns(now),
        }
        detail = {
            "kind": "rollback",
            "alert": alert["run_key"],
            "rule": alert.get("rule"),
            "from_version": from_version,
            "to_version": to_version,
            "candidate_digest": digest,
            "required_approvals": values["required_approvals"],
            "approvers": values.get("approvers") or [],
        }
        with self.tx() as conn:
            existing = self._requests.insert_once(conn, values, channel="alertmanager", detail=detail, now=now)
            if existing is not None:
                return existing, False
            return dict(conn.execute(select(r).where(r.c.id == request_id)).one()._mapping), True
