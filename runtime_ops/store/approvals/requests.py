"""Approval requests of a pipeline (or an asset gate): open (once per digest, auditing the opening), get, list.

Requests are scope-owned (the `pipeline` column holds the pipeline's or the gate's name): a digest has one request
per scope, opening one supersedes only the scope's own pending requests for the same target, and a request id of
another scope reads as unknown. A model promotion's request has no `target` (NULL); an asset gate's names the
gated asset (one label per partition), so the partitions of one gate never supersede each other.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, select, update
from sqlalchemy.engine import Connection

from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.approvals.lifecycle import Lifecycle
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository, row_dict

OPEN = "pending"
_R = t.approval_requests


def new_request_id(now: datetime) -> str:
    return f"apr-{now:%Y%m%d}-{secrets.token_hex(4)}"


class Requests(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, audit: Audit, lifecycle: Lifecycle) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit
        self._lifecycle = lifecycle

    def open_request(
        self,
        *,
        candidate_digest: str,
        requested_by: str,
        candidate_version: int | None = None,
        eval_report_id: int | None = None,
        target: str | None = None,
        evidence: dict[str, Any] | None = None,
        kind: str = "human",
        decided_by: str | None = None,
        decision_reason: str | None = None,
        run_id: str | None = None,
        policy: RequestPolicy | None = None,
        compensation: str | None = None,
        now: datetime | None = None,
        trace_context: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Open the approval request for a digest, once. Returns (request, created).

        A `policy` request is created already approved. Opening a request supersedes the scope's pending requests
        for other digests of the same target (`None`: the model promotion): a decision applies only to what it
        was shown.
        """
        pipeline = self.owner("open an approval request")
        now = now or utcnow()
        policy = policy or RequestPolicy()
        request_id = new_request_id(now)
        values: dict[str, Any] = {
            "id": request_id,
            "pipeline": pipeline,
            "candidate_version": candidate_version,
            "candidate_digest": candidate_digest,
            "eval_report_id": eval_report_id,
            "target": target,
            "evidence": evidence,
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
            **({"target": target} if target is not None else {"candidate_version": candidate_version}),
            "candidate_digest": candidate_digest,
            "kind": kind,
            "reason": decision_reason,
            "required_approvals": values["required_approvals"],
            "approvers": values.get("approvers") or [],
        }
        with self.tx() as conn:
            existing = self.insert_once(conn, values, channel="dagster", detail=detail, now=now)
            if existing is not None:
                return existing, False
            same_target = _R.c.target.is_(None) if target is None else _R.c.target == target
            stale = conn.execute(
                select(_R.c.id).where(
                    and_(_R.c.pipeline == pipeline, _R.c.status == OPEN, _R.c.id != request_id, same_target)
                )
            ).all()
            for s in stale:
                conn.execute(
                    update(_R)
                    .where(and_(_R.c.id == s.id, _R.c.status == OPEN))
                    .values(
                        status="superseded",
                        decided_at=now,
                        superseded_by=request_id,
                        decision_reason=f"superseded by {request_id}: "
                        + ("the candidate changed" if target is None else f"{target} was materialized again"),
                    )
                )
                self._audit.append_in(
                    conn,
                    event="superseded",
                    request_id=s.id,
                    channel="dagster",
                    outcome="superseded",
                    detail={"superseded_by": request_id},
                    now=now,
                )
                self._lifecycle.follow_status_in(
                    conn, s.id, "superseded", actor=requested_by, reason=f"superseded by {request_id}", now=now
                )
            if target is None and candidate_version is not None:
                # An approved candidate not yet launched is superseded too: a promotion re-verifies the latest
                # candidate, so it could never reach production; the lifecycle says so now instead of at promotion.
                self._lifecycle.supersede_unlaunched_in(conn, request_id, actor=requested_by, now=now)
                self._lifecycle.open_in(conn, values, now)
            return values, True

    def insert_once(
        self, conn: Connection, values: dict[str, Any], *, channel: str, detail: dict[str, Any], now: datetime
    ) -> dict[str, Any] | None:
        """Insert the request `values` (of the scope's pipeline) and audit its opening, unless its candidate
        digest already has a request in the pipeline (before, or by a concurrent opener winning the insert):
        then that request, with nothing written."""
        values = {**values, "pipeline": self.owner("open an approval request")}
        by_digest = select(_R).where(
            and_(_R.c.pipeline == values["pipeline"], _R.c.candidate_digest == values["candidate_digest"])
        )
        row = conn.execute(by_digest).first()
        if row is None and conn.execute(upsert(_R, conn).on_conflict_do_nothing().values(**values)).rowcount:
            self._audit.append_in(
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
            q = select(_R).where(and_(_R.c.candidate_digest == candidate_digest, self.owned(_R)))
            return row_dict(conn.execute(q.order_by(_R.c.created_at).limit(1)).first())

    def requests_for_target(self, target: str, digest: str) -> list[dict[str, Any]]:
        """The requests (of every scope, when unscoped: each gate on the target has its own) for one
        materialization of a gated target, oldest first."""
        q = select(_R).where(and_(_R.c.target == target, _R.c.candidate_digest == digest, self.owned(_R)))
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q.order_by(_R.c.created_at))]

    def get_request(self, request_id: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            return self.get_request_in(conn, request_id)

    def get_request_in(self, conn: Connection, request_id: str) -> dict[str, Any] | None:
        return row_dict(conn.execute(select(_R).where(and_(_R.c.id == request_id, self.owned(_R)))).first())

    def list_requests(self, status: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        q = select(_R).where(self.owned(_R)).order_by(_R.c.created_at.desc()).limit(limit)
        if status:
            q = q.where(_R.c.status == status)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]
