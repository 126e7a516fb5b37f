"""Votes on approval requests: one attempt to decide is one transaction that locks the request row, counts
the vote, compare-and-sets the outcome and appends the attempt to the request's audit chain, so concurrent
clicks yield exactly one outcome and every attempt leaves a record."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, bindparam, func, select, update
from sqlalchemy.engine import Connection

from runtime_ops.policies.approvals import authorise, tally
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.approvals.lifecycle import Lifecycle
from runtime_ops.store.approvals.requests import OPEN, Requests
from runtime_ops.store.approvals.writebatch import WriteBatch
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository

_R, _V = t.approval_requests, t.approval_votes


# Statements of the decision path, built once so SQLAlchemy compiles each a single time.
def _vote_count(condition: Any) -> Any:
    return select(func.count()).where(and_(_V.c.request_id == _R.c.id, condition)).correlate(_R).scalar_subquery()


# The request row of the pipeline, locked, with its vote counts: one round trip for everything a decision needs.
_REQUEST_WITH_COUNTS = select(
    _R,
    _vote_count(_V.c.vote == "approve").label("n_approvals"),
    _vote_count(_V.c.vote == "reject").label("n_rejects"),
    _vote_count(_V.c.actor == bindparam("actor")).label("n_mine"),
)
_REQUEST_FOR_UPDATE = _REQUEST_WITH_COUNTS.where(
    and_(_R.c.id == bindparam("rid"), _R.c.pipeline == bindparam("pipeline"))
).with_for_update(of=_R)
# Request ids are global: a vote through an unscoped store (the ops API, the CLI) decides the request in the
# pipeline that owns it; what the decision then changes happens in that pipeline's own promotion run.
_ANY_REQUEST_FOR_UPDATE = _REQUEST_WITH_COUNTS.where(_R.c.id == bindparam("rid")).with_for_update(of=_R)
_VOTES = select(_V.c.actor, _V.c.vote).where(_V.c.request_id == bindparam("rid")).order_by(_V.c.id)
_DELIVERY = select(t.interaction_deliveries.c.message).where(t.interaction_deliveries.c.dedupe_key == bindparam("k"))


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


class Votes(Repository):
    def __init__(
        self, engine: Engine, pipeline: str | None, audit: Audit, requests: Requests, lifecycle: Lifecycle
    ) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit
        self._requests = requests
        self._lifecycle = lifecycle

    def for_request(self, request_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            mine = and_(_V.c.request_id == request_id, self.owned(_R))
            q = select(_V).join(_R, _R.c.id == _V.c.request_id).where(mine)
            return [dict(r._mapping) for r in conn.execute(q.order_by(_V.c.id))]

    def link_use(self, nonce: str) -> dict[str, Any] | None:
        """The use of the signed link `nonce` (when and for what it decided), or None: it was never used."""
        with self.tx() as conn:
            row = conn.execute(select(t.link_uses).where(t.link_uses.c.nonce == nonce)).first()
            return dict(row._mapping) if row else None

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
        pipeline = self.pipeline
        statement = _REQUEST_FOR_UPDATE if pipeline is not None else _ANY_REQUEST_FOR_UPDATE
        now = now or utcnow()
        action = "approve" if approve else "reject"
        try:
            with self.tx() as conn:
                params = {"rid": request_id, "actor": actor, "pipeline": pipeline}
                row = conn.execute(statement, params).first()
                request, counts = None, (0, 0, 0)
                if row is not None:
                    request = dict(row._mapping)
                    counts = (request.pop("n_approvals"), request.pop("n_rejects"), request.pop("n_mine"))
                batch = WriteBatch(key=self._audit.key)
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
                decided = batch.changes.get("status") if batch.changes else None
                if decided is not None and request is not None:
                    why = str(batch.changes.get("decision_reason") or f"{decided} by {actor}")
                    by = str(batch.changes.get("decided_by") or actor)
                    self._lifecycle.follow_status_in(conn, request_id, decided, actor=by, reason=why, now=now)
                return result
        except _Redelivery:
            with self.tx() as conn:
                seen = conn.execute(_DELIVERY, {"k": dedupe_key}).one()
                return VoteResult("duplicate_delivery", seen.message, self._requests.get_request_in(conn, request_id))

    def decide_by_policy(
        self,
        request_id: str,
        *,
        actor: str,
        approve: bool,
        reason: str,
        detail: dict[str, Any],
        now: datetime | None = None,
    ) -> VoteResult:
        """A policy decides a pending request (no vote: the rule is the decider, as for an auto-approval): lock the
        row, compare-and-set pending → approved/rejected with `actor` and `reason`, and audit it, in one transaction.
        `already_decided` when a person (or the deadline) got there first; nothing changes then."""
        now = now or utcnow()
        status = "approved" if approve else "rejected"
        with self.tx() as conn:
            row = conn.execute(_ANY_REQUEST_FOR_UPDATE, {"rid": request_id, "actor": actor}).first()
            if row is None or (self.pipeline is not None and row.pipeline != self.pipeline):
                return VoteResult("unknown_request", f"there is no approval request {request_id!r}", None)
            request = {k: v for k, v in row._mapping.items() if k not in ("n_approvals", "n_rejects", "n_mine")}
            if request["status"] != OPEN:
                return VoteResult("already_decided", f"{request_id} is already {request['status']}", request)
            changes = {"status": status, "decided_at": now, "decided_by": actor, "decision_reason": reason}
            conn.execute(update(_R).where(and_(_R.c.id == request_id, _R.c.status == OPEN)).values(**changes))
            self._audit.append_in(
                conn,
                event="decided",
                request_id=request_id,
                actor=actor,
                channel="policy",
                outcome=status,
                detail={"reason": reason, **detail},
                now=now,
            )
            self._lifecycle.follow_status_in(conn, request_id, status, actor=actor, reason=reason, now=now)
            request.update(changes)
            return VoteResult("accepted", f"{request_id} {status} by {actor}", request)

    def _vote_locked(
        self,
        conn: Connection,
        request: dict[str, Any] | None,
        counts: tuple[int, int, int],
        batch: WriteBatch,
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
            self._audit.append_in(
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
                upsert(t.link_uses, conn)
                .on_conflict_do_nothing()
                .values(nonce=link_nonce, request_id=request_id, approver=actor, action=action, used_at=now)
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
