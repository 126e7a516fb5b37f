"""Approval requests, votes, signed-link uses and the hash-chained audit log.

Every decision is one transaction: the request row is locked, the vote counted, the outcome written with a
compare-and-set and the attempt appended to the audit chain, so concurrent clicks yield exactly one outcome
and every attempt leaves a record.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, and_, bindparam, delete, func, insert, select, text, update
from sqlalchemy.engine import Connection

from runtime_ops.approvals import audit as chain_mod
from runtime_ops.approvals.rules import RequestPolicy, authorise, tally
from runtime_ops.store import schema as t
from runtime_ops.store.sql import insert_ignore, utcnow

OPEN = "pending"


# Statements of the decision path, built once so SQLAlchemy compiles each a single time.
def _vote_count(condition: Any) -> Any:
    v = t.approval_votes
    return (
        select(func.count())
        .where(and_(v.c.request_id == t.approval_requests.c.id, condition))
        .correlate(t.approval_requests)
        .scalar_subquery()
    )


# The request row, locked, with its vote counts: one round trip for everything a decision needs to know.
_REQUEST_FOR_UPDATE = (
    select(
        t.approval_requests,
        _vote_count(t.approval_votes.c.vote == "approve").label("n_approvals"),
        _vote_count(t.approval_votes.c.vote == "reject").label("n_rejects"),
        _vote_count(t.approval_votes.c.actor == bindparam("actor")).label("n_mine"),
    )
    .where(t.approval_requests.c.id == bindparam("rid"))
    .with_for_update(of=t.approval_requests)
)
_REQUEST_HEAD = (
    select(t.approval_requests.c.audit_seq, t.approval_requests.c.audit_hash)
    .where(t.approval_requests.c.id == bindparam("rid"))
    .with_for_update()
)
_SET_REQUEST_HEAD = (
    update(t.approval_requests)
    .where(t.approval_requests.c.id == bindparam("rid"))
    .values(audit_seq=bindparam("b_seq"), audit_hash=bindparam("b_hash"))
)
_GLOBAL_HEAD = select(t.audit_head).where(t.audit_head.c.id == 1).with_for_update()
_SET_GLOBAL_HEAD = (
    update(t.audit_head).where(t.audit_head.c.id == 1).values(last_id=bindparam("b_seq"), last_hash=bindparam("b_hash"))
)
_INSERT_AUDIT = insert(t.audit_log)
_VOTES = (
    select(t.approval_votes.c.actor, t.approval_votes.c.vote)
    .where(t.approval_votes.c.request_id == bindparam("rid"))
    .order_by(t.approval_votes.c.id)
)
_DELIVERY = select(t.interaction_deliveries.c.message).where(t.interaction_deliveries.c.dedupe_key == bindparam("k"))
# ON CONFLICT DO NOTHING is spelled the same by PostgreSQL and SQLite.
_INSERT_LINK_USE = text(
    "INSERT INTO link_uses (nonce, request_id, approver, action, used_at) "
    "VALUES (:nonce, :request_id, :approver, :action, :used_at) ON CONFLICT DO NOTHING"
).bindparams(bindparam("used_at", type_=t.UTCDateTime()))


@dataclass
class _WriteBatch:
    """The writes of one decision, sent to PostgreSQL as one multi-statement round trip.

    The rows are locked and every check done before they are sent, so batching changes no outcome; SQLite (one
    statement per call) gets the same statements one by one. The delivery insert goes last so the batch's row
    count says whether this click was new.
    """

    vote: dict[str, Any] | None = None
    audits: list[dict[str, Any]] = field(default_factory=list)
    request_id: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    delivery: dict[str, Any] | None = None

    def audit(self, chain: str, head: tuple[int, str], **fields: Any) -> dict[str, Any]:
        record = ApprovalsMixin._record(chain, head, **fields)
        self.audits.append(record)
        return record

    def statements(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        if self.vote:
            out.append((_SQL_VOTE, {f"v_{k}": v for k, v in self.vote.items()}))
        for i, rec in enumerate(self.audits):
            sql = _SQL_AUDIT.replace(":a_", f":a{i}_")
            out.append((sql, {f"a{i}_{k}": v for k, v in rec.items()}))
        if self.request_id:
            sets = ", ".join(f"{k} = :u_{k}" for k in self.changes)
            out.append(
                (
                    f"UPDATE approval_requests SET {sets} WHERE id = :u_rid",
                    {"u_rid": self.request_id, **{f"u_{k}": v for k, v in self.changes.items()}},
                )
            )
        if self.delivery:
            out.append((_SQL_DELIVERY, {f"d_{k}": v for k, v in self.delivery.items()}))
        return out

    def flush(self, conn: Connection) -> int:
        """Run the writes; returns the row count of the last one (the delivery insert when there is one)."""
        parts = self.statements()
        if not parts:
            return 0
        if conn.dialect.name == "postgresql":
            params = {k: v for _, p in parts for k, v in p.items()}
            sql = ";\n".join(sql for sql, _ in parts)
            return int(conn.execute(_typed_text(sql, tuple(sorted(params))), params).rowcount or 0)
        count = 0
        for sql, p in parts:
            count = int(conn.execute(_typed_text(sql, tuple(sorted(p))), p).rowcount or 0)
        return count


_SQL_VOTE = (
    "INSERT INTO approval_votes (request_id, actor, vote, channel, created_at) "
    "VALUES (:v_request_id, :v_actor, :v_vote, :v_channel, :v_created_at)"
)
_SQL_AUDIT = (
    "INSERT INTO audit_log (chain, seq, at, request_id, event, actor, channel, outcome, detail, prev_hash, hash) "
    "VALUES (:a_chain, :a_seq, :a_at, :a_request_id, :a_event, :a_actor, :a_channel, :a_outcome, :a_detail, "
    ":a_prev_hash, :a_hash)"
)
_SQL_DELIVERY = (
    "INSERT INTO interaction_deliveries (dedupe_key, request_id, outcome, message, created_at) "
    "VALUES (:d_dedupe_key, :d_request_id, :d_outcome, :d_message, :d_created_at) ON CONFLICT DO NOTHING"
)
_DATETIME_PARAMS = ("_at", "_created_at", "_decided_at")


@functools.lru_cache(maxsize=256)
def _typed_text(sql: str, names: tuple[str, ...]) -> Any:
    """A text() statement whose datetime and JSON parameters are typed (so both backends store them alike)."""
    binds = []
    for name in names:
        if name.endswith(_DATETIME_PARAMS):
            binds.append(bindparam(name, type_=t.UTCDateTime()))
        elif name.endswith("_detail"):
            binds.append(bindparam(name, type_=JSON()))
    return text(sql).bindparams(*binds)


class _Redelivery(Exception):
    """Slack delivered a click that was already recorded."""


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

    # ------------------------------------------------------------------ audit chains
    @staticmethod
    def _record(chain: str, head: tuple[int, str], **fields: Any) -> dict[str, Any]:
        """The audit record that follows `head` of `chain` (not yet written)."""
        record = {
            "chain": chain,
            "seq": head[0] + 1,
            "at": fields.pop("now", None) or utcnow(),
            "request_id": fields.get("request_id"),
            "event": fields["event"],
            "actor": fields.get("actor"),
            "channel": fields.get("channel"),
            "outcome": fields.get("outcome"),
            "detail": fields.get("detail") or {},
            "prev_hash": head[1],
        }
        record["hash"] = chain_mod.record_hash(head[1], record)
        return record

    def _append(self, conn: Connection, chain: str, head: tuple[int, str], **fields: Any) -> dict[str, Any]:
        """Append one record after `head` of `chain`; the caller stores the new head (record seq, hash)."""
        record = self._record(chain, head, **fields)
        conn.execute(_INSERT_AUDIT, record)
        return record

    def _audit(self, conn: Connection, **fields: Any) -> dict[str, Any]:
        """Append to the chain of `request_id` (locking its row) or, for no known request, the global chain."""
        request_id = fields.get("request_id")
        row = conn.execute(_REQUEST_HEAD, {"rid": request_id}).first() if request_id else None
        if row is not None:
            record = self._append(conn, request_id, (row.audit_seq, row.audit_hash), **fields)
            conn.execute(_SET_REQUEST_HEAD, {"rid": request_id, "b_seq": record["seq"], "b_hash": record["hash"]})
            return record
        head = conn.execute(_GLOBAL_HEAD).one()
        record = self._append(conn, chain_mod.GLOBAL_CHAIN, (head.last_id, head.last_hash), **fields)
        conn.execute(_SET_GLOBAL_HEAD, {"b_seq": record["seq"], "b_hash": record["hash"]})
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

    def audit_heads(self) -> dict[str, tuple[int, str]]:
        with self.tx() as conn:
            heads = {
                r.id: (int(r.audit_seq), str(r.audit_hash))
                for r in conn.execute(
                    select(t.approval_requests.c.id, t.approval_requests.c.audit_seq, t.approval_requests.c.audit_hash)
                )
            }
            g = conn.execute(select(t.audit_head).where(t.audit_head.c.id == 1)).one()
            heads[chain_mod.GLOBAL_CHAIN] = (int(g.last_id), str(g.last_hash))
            return heads

    def verify_audit(self) -> chain_mod.ChainReport:
        heads = self.audit_heads()
        return chain_mod.verify(self.iter_audit(), heads=heads)

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
        trace_context: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Open the approval request for a candidate digest, once. Returns (request, created).

        A `policy` request is created already approved. Opening a request supersedes pending requests for other
        digests: a decision applies only to the candidate it was shown.
        """
        now = now or utcnow()
        policy = policy or RequestPolicy()
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
            # W3C traceparent of the span that opened it: decisions link back to it across processes.
            "trace_context": trace_context,
            **(policy.to_columns(now) if kind == "human" else {"required_approvals": 1}),
        }
        if kind == "policy":
            values.update(decided_at=now, decided_by=decided_by or "policy", decision_reason=decision_reason)
        detail = {
            "candidate_version": candidate_version,
            "candidate_digest": candidate_digest,
            "kind": kind,
            "reason": decision_reason,
            "required_approvals": values["required_approvals"],
            "approvers": values.get("approvers") or [],
        }
        with self.tx() as conn:
            existing = self._insert_request_once(conn, values, channel="dagster", detail=detail, now=now)
            if existing is not None:
                return existing, False
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

    def _insert_request_once(
        self, conn: Connection, values: dict[str, Any], *, channel: str, detail: dict[str, Any], now: datetime
    ) -> dict[str, Any] | None:
        """Insert the request `values` and audit its opening, unless its candidate digest already has a request
        (before, or by a concurrent opener winning the insert): then that request, with nothing written."""
        r = t.approval_requests
        by_digest = select(r).where(r.c.candidate_digest == values["candidate_digest"])
        row = conn.execute(by_digest).first()
        if row is None and conn.execute(insert_ignore(r, conn).values(**values)).rowcount:
            self._audit(
                conn,
                event="request_opened",
                request_id=values["id"],
                actor=values["requested_by"],
                channel=channel,
                outcome=values["status"],
                detail=detail,
                now=now,
            )
            return None
        return dict((row or conn.execute(by_digest).one())._mapping)

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
        """One attempt to decide: lock the request row, count the vote, compare-and-set the outcome and append
        the attempt to the request's audit chain, all in one transaction. This is the hot path of a Slack
        click, so its statements are built once (module level) and the request is read once."""
        now = now or utcnow()
        action = "approve" if approve else "reject"
        try:
            with self.tx() as conn:
                row = conn.execute(_REQUEST_FOR_UPDATE, {"rid": request_id, "actor": actor}).first()
                request, counts = None, (0, 0, 0)
                if row is not None:
                    request = dict(row._mapping)
                    counts = (request.pop("n_approvals"), request.pop("n_rejects"), request.pop("n_mine"))
                batch = _WriteBatch()
                result = self._vote_locked(
                    conn,
                    request,
                    counts,
                    batch,
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
                    # Optimistic: a redelivery is rare, so the last insert detects it instead of a lookup
                    # first; the redelivery's transaction then rolls back whole, as if it never ran.
                    batch.delivery = {
                        "dedupe_key": dedupe_key,
                        "request_id": request_id,
                        "outcome": result.outcome,
                        "message": result.message,
                        "created_at": now,
                    }
                claimed = batch.flush(conn)
                if dedupe_key and not claimed:
                    raise _Redelivery
                return result
        except _Redelivery:
            with self.tx() as conn:
                seen = conn.execute(_DELIVERY, {"k": dedupe_key}).one()
                return VoteResult("duplicate_delivery", seen.message, self.get_request_in(conn, request_id))

    def get_request_in(self, conn: Connection, request_id: str) -> dict[str, Any] | None:
        row = conn.execute(select(t.approval_requests).where(t.approval_requests.c.id == request_id)).first()
        return dict(row._mapping) if row else None

    def _vote_locked(
        self,
        conn: Connection,
        request: dict[str, Any] | None,
        counts: tuple[int, int, int],
        batch: _WriteBatch,
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
        if request is None:
            self._audit(
                conn,
                event="attempt",
                request_id=request_id,
                actor=actor,
                channel=channel,
                outcome="unknown_request",
                now=now,
                detail={"action": action, "message": f"there is no approval request {request_id!r}"},
            )
            return VoteResult("unknown_request", f"there is no approval request {request_id!r}", None)
        head = (int(request["audit_seq"]), str(request["audit_hash"]))
        changes: dict[str, Any] = {}

        def attempt(outcome: str, message: str) -> VoteResult:
            nonlocal head
            rec = batch.audit(
                request_id,
                head,
                event="attempt",
                request_id=request_id,
                actor=actor,
                channel=channel,
                outcome=outcome,
                now=now,
                detail={"action": action, "reason": reason, "message": message},
            )
            head = (rec["seq"], rec["hash"])
            return VoteResult(outcome, message, request)

        def finish(result: VoteResult) -> VoteResult:
            # One UPDATE carries the new chain head and, when decided, the outcome (a compare-and-set: the row
            # is locked and was pending when read).
            changes.update(audit_seq=head[0], audit_hash=head[1])
            batch.request_id, batch.changes = request_id, dict(changes)
            request.update(changes)
            return VoteResult(result.outcome, result.message, request)

        if link_digest is not None and link_digest != request["candidate_digest"]:
            return finish(attempt("wrong_digest", "this link was issued for a different candidate"))
        if link_nonce is not None:
            used = conn.execute(
                _INSERT_LINK_USE,
                {"nonce": link_nonce, "request_id": request_id, "approver": actor, "action": action, "used_at": now},
            )
            if not used.rowcount:
                return finish(attempt("link_reused", "this approval link was already used"))
        if request["status"] != OPEN:
            by = f" by {request['decided_by']}" if request.get("decided_by") else ""
            return finish(attempt("already_decided", f"{request_id} is already {request['status']}{by}"))
        approvals, rejects, mine = counts
        refusal = authorise(request, actor, mine > 0, now)
        if refusal is not None:
            if refusal.outcome == "expired":
                # Fail closed right away; the approvals sensor runs the compensation.
                changes.update(
                    status="expired",
                    decided_at=now,
                    decided_by="deadline",
                    decision_reason="expired without a decision: rejected (fail closed)",
                )
                result = attempt(refusal.outcome, refusal.message)
                rec = batch.audit(
                    request_id,
                    head,
                    event="expired",
                    request_id=request_id,
                    channel="deadline",
                    outcome="expired",
                    now=now,
                    detail={"expire_at": request["expire_at"].isoformat()},
                )
                head = (rec["seq"], rec["hash"])
                return finish(result)
            return finish(attempt(refusal.outcome, refusal.message))
        batch.vote = {"request_id": request_id, "actor": actor, "vote": action, "channel": channel, "created_at": now}
        approvals += action == "approve"
        rejects += action == "reject"
        required = int(request["required_approvals"] or 1)
        status = tally(approvals, rejects, required)
        if status == OPEN:
            message = f"approval {approvals} of {required} recorded for {request_id} ({actor})"
            return finish(attempt("recorded", message))
        # A reject decides alone; an approval decides with the approvals before it (read only for M-of-N).
        earlier = (
            []
            if status == "rejected" or required == 1
            else [v.actor for v in conn.execute(_VOTES, {"rid": request_id}) if v.vote == "approve"]
        )
        deciders = ", ".join([*earlier, actor])
        changes.update(status=status, decided_at=now, decided_by=deciders, decision_reason=reason)
        result = attempt("accepted", f"{request_id} {status} by {deciders}")
        rec = batch.audit(
            request_id,
            head,
            event="decided",
            request_id=request_id,
            actor=deciders,
            channel=channel,
            outcome=status,
            now=now,
            detail={"reason": reason, "approvals": approvals, "rejects": rejects},
        )
        head = (rec["seq"], rec["hash"])
        return finish(result)

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
