"""Approval requests, votes, signed-link uses and the hash-chained audit log.

Every decision is one transaction: the request row is locked, the vote counted, the outcome written with a
compare-and-set and the attempt appended to the audit chain, so concurrent clicks yield exactly one outcome
and every attempt leaves a record.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from runtime_ops.approvals import audit as chain
from runtime_ops.approvals.rules import RequestPolicy, authorise, tally
from runtime_ops.store import schema as t
from runtime_ops.store.sql import insert_ignore, utcnow

OPEN = "pending"


@dataclass(frozen=True)
class VoteResult:
    """The outcome of one approve/reject attempt."""

    outcome: str  # accepted | recorded | already_decided | unknown_request | unauthorised | self_approval |
    #               duplicate_vote | expired | link_reused | duplicate_delivery
    message: str
    request: dict[str, Any] | None

    @property
    def counted(self) -> bool:
        return self.outcome in ("accepted", "recorded")


class ApprovalsMixin:
    engine: Any

    @contextlib.contextmanager
    def tx(self) -> Iterator[Connection]:  # provided by StateStore
        raise NotImplementedError
        yield  # pragma: no cover

    # ------------------------------------------------------------------ audit chain
    def _audit(
        self,
        conn: Connection,
        *,
        event: str,
        request_id: str | None = None,
        actor: str | None = None,
        channel: str | None = None,
        outcome: str | None = None,
        detail: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        head = conn.execute(select(t.audit_head).where(t.audit_head.c.id == 1).with_for_update()).one()
        record = {
            "id": head.last_id + 1,
            "at": now or utcnow(),
            "request_id": request_id,
            "event": event,
            "actor": actor,
            "channel": channel,
            "outcome": outcome,
            "detail": detail or {},
        }
        record["prev_hash"] = head.last_hash
        record["hash"] = chain.record_hash(head.last_hash, record)
        conn.execute(insert(t.audit_log).values(**record))
        conn.execute(
            update(t.audit_head).where(t.audit_head.c.id == 1).values(last_id=record["id"], last_hash=record["hash"])
        )
        return record

    def audit(self, **fields: Any) -> dict[str, Any]:
        with self.tx() as conn:
            return self._audit(conn, **fields)

    def audit_records(self, request_id: str | None = None) -> list[dict[str, Any]]:
        q = select(t.audit_log).order_by(t.audit_log.c.id)
        if request_id is not None:
            q = q.where(t.audit_log.c.request_id == request_id)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def iter_audit(self, page: int = 5000) -> Iterator[dict[str, Any]]:
        last = 0
        while True:
            with self.tx() as conn:
                rows = conn.execute(
                    select(t.audit_log).where(t.audit_log.c.id > last).order_by(t.audit_log.c.id).limit(page)
                ).all()
            if not rows:
                return
            for r in rows:
                yield dict(r._mapping)
            last = rows[-1].id

    def audit_head(self) -> tuple[int, str]:
        with self.tx() as conn:
            head = conn.execute(select(t.audit_head).where(t.audit_head.c.id == 1)).one()
            return int(head.last_id), str(head.last_hash)

    def verify_audit(self) -> chain.ChainReport:
        head = self.audit_head()
        return chain.verify(self.iter_audit(), head=head)

    # ------------------------------------------------------------------ requests
    def open_request(
        self,
        *,
        candidate_version: int,
        candidate_digest: str,
        eval_report_id: int,
        requested_by: str,
        kind: str = "human",
        decided_by: str | None = None,
        decision_reason: str | None = None,
        run_id: str | None = None,
        policy: RequestPolicy | None = None,
        compensation: str | None = None,
        now: datetime | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Open the approval request for a candidate digest, once. Returns (request, created).

        A `policy` request is created already approved. Opening a request supersedes pending requests for other
        digests: a decision applies only to the candidate it was shown.
        """
        now = now or utcnow()
        policy = policy or RequestPolicy()
        with self.tx() as conn:
            row = conn.execute(
                select(t.approval_requests).where(t.approval_requests.c.candidate_digest == candidate_digest)
            ).first()
            if row:
                return dict(row._mapping), False
            request_id = f"apr-{now:%Y%m%d}-{secrets.token_hex(4)}"
            values: dict[str, Any] = {
                "id": request_id,
                "candidate_version": candidate_version,
                "candidate_digest": candidate_digest,
                "eval_report_id": eval_report_id,
                "kind": kind,
                "status": "approved" if kind == "policy" else OPEN,
                "requested_by": requested_by,
                "created_at": now,
                "run_id": run_id,
                "compensation": compensation if kind == "human" else None,
                **(policy.to_columns(now) if kind == "human" else {"required_approvals": 1}),
            }
            if kind == "policy":
                values.update(decided_at=now, decided_by=decided_by or "policy", decision_reason=decision_reason)
            res = conn.execute(insert_ignore(t.approval_requests, conn).values(**values))
            if not res.rowcount:  # a concurrent gate opened it first
                row = conn.execute(
                    select(t.approval_requests).where(t.approval_requests.c.candidate_digest == candidate_digest)
                ).one()
                return dict(row._mapping), False
            self._audit(
                conn,
                event="request_opened",
                request_id=request_id,
                actor=requested_by,
                channel="dagster",
                outcome=values["status"],
                detail={
                    "candidate_version": candidate_version,
                    "candidate_digest": candidate_digest,
                    "kind": kind,
                    "reason": decision_reason,
                    "required_approvals": values["required_approvals"],
                    "approvers": values.get("approvers") or [],
                },
                now=now,
            )
            stale = conn.execute(
                select(t.approval_requests.c.id).where(
                    and_(t.approval_requests.c.status == OPEN, t.approval_requests.c.id != request_id)
                )
            ).all()
            for s in stale:
                conn.execute(
                    update(t.approval_requests)
                    .where(and_(t.approval_requests.c.id == s.id, t.approval_requests.c.status == OPEN))
                    .values(
                        status="superseded",
                        decided_at=now,
                        superseded_by=request_id,
                        decision_reason=f"superseded by {request_id}: the candidate changed",
                    )
                )
                self._audit(
                    conn,
                    event="superseded",
                    request_id=s.id,
                    channel="dagster",
                    outcome="superseded",
                    detail={"superseded_by": request_id},
                    now=now,
                )
            return values, True

    def request_for_digest(self, candidate_digest: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(
                select(t.approval_requests).where(t.approval_requests.c.candidate_digest == candidate_digest)
            ).first()
            return dict(row._mapping) if row else None

    def get_request(self, request_id: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.approval_requests).where(t.approval_requests.c.id == request_id)).first()
            return dict(row._mapping) if row else None

    def list_requests(self, status: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        q = select(t.approval_requests).order_by(t.approval_requests.c.created_at.desc()).limit(limit)
        if status:
            q = q.where(t.approval_requests.c.status == status)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def votes(self, request_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.approval_votes).where(t.approval_votes.c.request_id == request_id)
            return [dict(r._mapping) for r in conn.execute(q.order_by(t.approval_votes.c.id))]

    # ------------------------------------------------------------------ decisions
    def cast_vote(
        self,
        request_id: str,
        *,
        actor: str,
        approve: bool,
        channel: str,
        reason: str | None = None,
        now: datetime | None = None,
        dedupe_key: str | None = None,
        link_nonce: str | None = None,
        link_digest: str | None = None,
    ) -> VoteResult:
        now = now or utcnow()
        action = "approve" if approve else "reject"
        with self.tx() as conn:
            if dedupe_key:
                seen = conn.execute(
                    select(t.interaction_deliveries).where(t.interaction_deliveries.c.dedupe_key == dedupe_key)
                ).first()
                if seen:
                    req = conn.execute(
                        select(t.approval_requests).where(t.approval_requests.c.id == request_id)
                    ).first()
                    return VoteResult("duplicate_delivery", seen.message, dict(req._mapping) if req else None)
            row = conn.execute(
                select(t.approval_requests).where(t.approval_requests.c.id == request_id).with_for_update()
            ).first()
            result = self._vote_locked(
                conn,
                row,
                request_id=request_id,
                actor=actor,
                action=action,
                channel=channel,
                reason=reason,
                now=now,
                link_nonce=link_nonce,
                link_digest=link_digest,
            )
            if dedupe_key:
                conn.execute(
                    insert_ignore(t.interaction_deliveries, conn).values(
                        dedupe_key=dedupe_key,
                        request_id=request_id,
                        outcome=result.outcome,
                        message=result.message,
                        created_at=now,
                    )
                )
            return result

    def _vote_locked(
        self,
        conn: Connection,
        row: Any,
        *,
        request_id: str,
        actor: str,
        action: str,
        channel: str,
        reason: str | None,
        now: datetime,
        link_nonce: str | None,
        link_digest: str | None,
    ) -> VoteResult:
        def attempt(outcome: str, message: str, request: dict[str, Any] | None, **detail: Any) -> VoteResult:
            self._audit(
                conn,
                event="attempt",
                request_id=request_id,
                actor=actor,
                channel=channel,
                outcome=outcome,
                detail={"action": action, "reason": reason, "message": message, **detail},
                now=now,
            )
            return VoteResult(outcome, message, request)

        if row is None:
            return attempt("unknown_request", f"there is no approval request {request_id!r}", None)
        request = dict(row._mapping)
        if link_digest is not None and link_digest != request["candidate_digest"]:
            return attempt("wrong_digest", "this link was issued for a different candidate", request)
        if link_nonce is not None:
            used = conn.execute(
                insert_ignore(t.link_uses, conn).values(
                    nonce=link_nonce, request_id=request_id, approver=actor, action=action, used_at=now
                )
            )
            if not used.rowcount:
                return attempt("link_reused", "this approval link was already used", request)
        if request["status"] != OPEN:
            by = f" by {request['decided_by']}" if request.get("decided_by") else ""
            return attempt("already_decided", f"{request_id} is already {request['status']}{by}", request)
        votes = [
            dict(v._mapping)
            for v in conn.execute(select(t.approval_votes).where(t.approval_votes.c.request_id == request_id))
        ]
        refusal = authorise(request, actor, votes, now)
        if refusal is not None:
            if refusal.outcome == "expired":
                # Fail closed right away; the approvals sensor runs the compensation.
                self._expire_locked(conn, request, now)
                request = dict(
                    conn.execute(select(t.approval_requests).where(t.approval_requests.c.id == request_id))
                    .one()
                    ._mapping
                )
            return attempt(refusal.outcome, refusal.message, request)
        conn.execute(
            insert(t.approval_votes).values(
                request_id=request_id, actor=actor, vote=action, channel=channel, created_at=now
            )
        )
        votes.append({"actor": actor, "vote": action})
        status = tally(votes, int(request["required_approvals"] or 1))
        if status == OPEN:
            count = sum(1 for v in votes if v["vote"] == "approve")
            message = f"approval {count} of {request['required_approvals']} recorded for {request_id} ({actor})"
            result = attempt("recorded", message, request)
        else:
            deciders = [v["actor"] for v in votes if v["vote"] == ("approve" if status == "approved" else "reject")]
            conn.execute(
                update(t.approval_requests)
                .where(and_(t.approval_requests.c.id == request_id, t.approval_requests.c.status == OPEN))
                .values(status=status, decided_at=now, decided_by=", ".join(deciders), decision_reason=reason)
            )
            message = f"{request_id} {status} by {', '.join(deciders)}"
            result = attempt("accepted", message, request)
            self._audit(
                conn,
                event="decided",
                request_id=request_id,
                actor=", ".join(deciders),
                channel=channel,
                outcome=status,
                detail={"reason": reason, "votes": len(votes)},
                now=now,
            )
        fresh = conn.execute(select(t.approval_requests).where(t.approval_requests.c.id == request_id)).one()
        return VoteResult(result.outcome, result.message, dict(fresh._mapping))

    # ------------------------------------------------------------------ deadlines and compensation
    def _expire_locked(self, conn: Connection, request: dict[str, Any], now: datetime) -> bool:
        res = conn.execute(
            update(t.approval_requests)
            .where(and_(t.approval_requests.c.id == request["id"], t.approval_requests.c.status == OPEN))
            .values(
                status="expired",
                decided_at=now,
                decided_by="deadline",
                decision_reason="expired without a decision: rejected (fail closed)",
            )
        )
        if res.rowcount:
            self._audit(
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
                select(t.approval_requests)
                .where(and_(t.approval_requests.c.status == OPEN, t.approval_requests.c.expire_at <= now))
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
                select(t.approval_requests.c.id, t.approval_requests.c.escalation_approvers)
                .where(
                    and_(
                        t.approval_requests.c.status == OPEN,
                        t.approval_requests.c.escalated_at.is_(None),
                        t.approval_requests.c.escalate_at <= now,
                    )
                )
                .with_for_update()
            ).all()
            for row in due:
                conn.execute(
                    update(t.approval_requests).where(t.approval_requests.c.id == row.id).values(escalated_at=now)
                )
                self._audit(
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
                select(t.approval_requests)
                .where(
                    and_(
                        t.approval_requests.c.status.in_(["expired", "rejected"]),
                        t.approval_requests.c.compensation.is_not(None),
                        t.approval_requests.c.compensated_at.is_(None),
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
                conn.execute(
                    update(t.approval_requests)
                    .where(t.approval_requests.c.id == request["id"])
                    .values(compensated_at=now)
                )
                self._audit(
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

    # ------------------------------------------------------------------ notifications
    def requests_to_notify(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.approval_requests).where(
                and_(
                    t.approval_requests.c.kind == "human",
                    t.approval_requests.c.notified_at.is_(None),
                    t.approval_requests.c.status == OPEN,
                )
            )
            return [dict(r._mapping) for r in conn.execute(q.order_by(t.approval_requests.c.created_at))]

    def requests_with_messages(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.approval_requests).where(t.approval_requests.c.slack_ts.is_not(None))
            return [dict(r._mapping) for r in conn.execute(q.order_by(t.approval_requests.c.created_at))]

    def escalations_to_notify(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.approval_requests).where(
                and_(
                    t.approval_requests.c.escalated_at.is_not(None),
                    t.approval_requests.c.escalation_notified_at.is_(None),
                    t.approval_requests.c.status == OPEN,
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
        with self.tx() as conn:
            res = conn.execute(
                update(t.approval_requests)
                .where(and_(t.approval_requests.c.id == request_id, t.approval_requests.c.notified_at.is_(None)))
                .values(notified_at=now, slack_channel=slack_channel, slack_ts=slack_ts, slack_status=slack_status)
            )
            if res.rowcount:
                self._audit(
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
        with self.tx() as conn:
            res = conn.execute(
                update(t.approval_requests)
                .where(
                    and_(t.approval_requests.c.id == request_id, t.approval_requests.c.escalation_notified_at.is_(None))
                )
                .values(escalation_notified_at=now)
            )
            if res.rowcount:
                self._audit(
                    conn,
                    event="escalation_notified",
                    request_id=request_id,
                    channel=channel,
                    outcome="sent",
                    detail=detail or {},
                    now=now,
                )

    def set_slack_status(self, request_id: str, slack_status: str) -> None:
        with self.tx() as conn:
            conn.execute(
                update(t.approval_requests)
                .where(t.approval_requests.c.id == request_id)
                .values(slack_status=slack_status)
            )

    # ------------------------------------------------------------------ promotion runs
    def approved_unlaunched(self) -> list[dict[str, Any]]:
        """Human approvals whose promotion run has not been recorded yet."""
        with self.tx() as conn:
            q = select(t.approval_requests).where(
                and_(
                    t.approval_requests.c.status == "approved",
                    t.approval_requests.c.kind == "human",
                    t.approval_requests.c.promotion_run_id.is_(None),
                )
            )
            return [dict(r._mapping) for r in conn.execute(q.order_by(t.approval_requests.c.decided_at))]

    def mark_request_launched(self, request_id: str, run_id: str) -> None:
        with self.tx() as conn:
            conn.execute(
                update(t.approval_requests)
                .where(t.approval_requests.c.id == request_id)
                .values(promotion_run_id=run_id)
            )


def remove_alias_compensation(alias: str) -> Any:
    """A compensation that removes `alias` when it still points at the request's candidate."""

    def compensate(conn: Connection, request: dict[str, Any], now: datetime) -> dict[str, Any]:
        row = conn.execute(select(t.aliases).where(t.aliases.c.name == alias).with_for_update()).first()
        if row is None or row.target != request["candidate_version"]:
            return {"alias": alias, "removed": False, "why": "alias no longer points at this candidate"}
        conn.execute(delete(t.aliases).where(t.aliases.c.name == alias))
        conn.execute(
            insert(t.alias_history).values(
                name=alias,
                old_target=row.target,
                new_target=0,
                approval_id=request["id"],
                actor="compensation",
                run_id=None,
                changed_at=now,
            )
        )
        return {"alias": alias, "removed": True, "version": row.target}

    return compensate
