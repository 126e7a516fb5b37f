"""Rollouts over the store: start one (at most one active per pipeline, the database says so), read the active one
(one indexed read), record a shadow comparison, and stop it, each start and stop audited on the chain of the
approval request it runs beside.

A ramp after approval is one canary row per stage (`next_stage` ends one and starts the next in one transaction;
`stages` reads them back). A rollout stops where the event that ends it already happens: production moving
(`Registry.set_alias` / `remove_alias` call `production_moved_in` in their own transaction), its request ending
without approval (the `remove_canary` compensation calls `stop_in`), and its deadline (`end_overdue`, on every
approvals-sensor tick; a ramp stage's deadline is judged with its evidence instead).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository, row_dict

_RO, _REQ = t.rollouts, t.approval_requests

ACTIVE, STOPPED, COMPLETED, ROLLED_BACK = "active", "stopped", "completed", "rolled_back"
ENDED = (STOPPED, COMPLETED, ROLLED_BACK)
STARTED_EVENT, STOPPED_EVENT = "rollout_started", "rollout_stopped"
CANARY = "canary"  # the mode of every ramp stage


class RolloutConflict(RuntimeError):
    """Another rollout of the pipeline is active (the database refused a second one)."""


class Rollouts(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, audit: Audit) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit

    def start(
        self,
        *,
        approval_id: str | None,
        candidate_version: int,
        candidate_index_id: int,
        production_version: int,
        mode: str,
        share: float,
        max_duration: timedelta,
        actor: str,
        stage: int | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """A new active rollout, audited; RolloutConflict when the pipeline has one already."""
        pipeline = self.owner("start a rollout")
        now = now or utcnow()
        values = {
            "pipeline": pipeline,
            "approval_id": approval_id,
            "candidate_version": candidate_version,
            "candidate_index_id": candidate_index_id,
            "production_version": production_version,
            "mode": mode,
            "share": share,
            "stage": stage,
            "status": ACTIVE,
            "started_at": now,
            "ends_at": now + max_duration,
            "actor": actor,
        }
        try:
            with self.tx() as conn:
                rid = self._insert_in(conn, values)
        except IntegrityError as exc:
            raise self._conflict() from exc
        found = self.get(rid)
        assert found is not None
        return found

    def _insert_in(self, conn: Connection, values: dict[str, Any]) -> int:
        rid = conn.execute(insert(_RO).values(**values).returning(_RO.c.id)).scalar_one()
        self._audit.append_in(
            conn,
            event=STARTED_EVENT,
            request_id=values["approval_id"],
            actor=values["actor"],
            channel="rollout",
            outcome=values["mode"],
            detail={
                "pipeline": values["pipeline"],
                "rollout_id": rid,
                "candidate_version": values["candidate_version"],
                "candidate_index_id": values["candidate_index_id"],
                "production_version": values["production_version"],
                "share": values["share"],
                **({"stage": values["stage"]} if values["stage"] is not None else {}),
                "ends_at": values["ends_at"].isoformat(),
            },
            now=values["started_at"],
        )
        return int(rid)

    def _conflict(self) -> RolloutConflict:
        active = self.active()
        which = f" (#{active['id']}, candidate v{active['candidate_version']})" if active else ""
        return RolloutConflict(f"pipeline {self.pipeline!r} already has an active rollout{which}: stop it first")

    def next_stage(
        self,
        *,
        approval_id: str,
        status: str,
        reason: str,
        actor: str,
        stage: int,
        share: float,
        candidate_version: int,
        candidate_index_id: int,
        production_version: int,
        max_duration: timedelta,
        now: datetime | None = None,
        then: Callable[[Connection], Any] | None = None,
    ) -> dict[str, Any]:
        """A ramp moves on in one transaction: the rollout beside `approval_id` (if active) ends as `status`, and the
        canary of stage `stage` at `share` starts, both audited; traffic is never left between two stages. `then`
        runs in the same transaction (the candidate's lifecycle move): its refusal undoes the stage."""
        pipeline = self.owner("start a ramp stage")
        now = now or utcnow()
        try:
            with self.tx() as conn:
                self.stop_in(conn, reason=reason, actor=actor, status=status, approval_id=approval_id, now=now)
                rid = self._insert_in(
                    conn,
                    {
                        "pipeline": pipeline,
                        "approval_id": approval_id,
                        "candidate_version": candidate_version,
                        "candidate_index_id": candidate_index_id,
                        "production_version": production_version,
                        "mode": CANARY,
                        "share": share,
                        "stage": stage,
                        "status": ACTIVE,
                        "started_at": now,
                        "ends_at": now + max_duration,
                        "actor": actor,
                    },
                )
                if then is not None:
                    then(conn)
        except IntegrityError as exc:
            raise self._conflict() from exc
        found = self.get(rid)
        assert found is not None
        return found

    def stages(self, approval_id: str) -> list[dict[str, Any]]:
        """The ramp stages run beside approval request `approval_id`, oldest first (none before its approval)."""
        with self.tx() as conn:
            q = select(_RO).where(_RO.c.approval_id == approval_id, _RO.c.stage.is_not(None), self.owned(_RO))
            return [dict(r._mapping) for r in conn.execute(q.order_by(_RO.c.id))]

    def stages_by_request(self, approval_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """`stages` of many requests in one read (a list of requests shows each one's ramp outcome)."""
        if not approval_ids:
            return {}
        found: dict[str, list[dict[str, Any]]] = {}
        with self.tx() as conn:
            q = select(_RO).where(_RO.c.approval_id.in_(approval_ids), _RO.c.stage.is_not(None), self.owned(_RO))
            for r in conn.execute(q.order_by(_RO.c.id)):
                found.setdefault(str(r.approval_id), []).append(dict(r._mapping))
        return found

    def get(self, rollout_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            return row_dict(conn.execute(select(_RO).where(_RO.c.id == rollout_id, self.owned(_RO))).first())

    def active(self) -> dict[str, Any] | None:
        """The pipeline's active rollout (one read of the partial unique index), or None."""
        pipeline = self.owner("read the active rollout")
        with self.tx() as conn:
            q = select(_RO).where(_RO.c.pipeline == pipeline, _RO.c.status == ACTIVE)
            return row_dict(conn.execute(q).first())

    def for_request(self, approval_id: str) -> dict[str, Any] | None:
        """The newest rollout that ran beside approval request `approval_id` while it waited (any status), or None:
        the one its online evidence comes from. Its ramp stages after approval are `stages`."""
        with self.tx() as conn:
            mine = [_RO.c.approval_id == approval_id, _RO.c.stage.is_(None), self.owned(_RO)]
            q = select(_RO).where(*mine).order_by(_RO.c.id.desc())
            return row_dict(conn.execute(q.limit(1)).first())

    def activity(self) -> tuple[list[str], list[dict[str, Any]]]:
        """The pipelines (of this scope) that ever had a rollout, and their active rollouts: what the rollout
        gauges of `/metrics` show."""
        with self.tx() as conn:
            pipelines = conn.execute(select(_RO.c.pipeline).where(self.owned(_RO)).distinct()).scalars().all()
            active = conn.execute(select(_RO).where(_RO.c.status == ACTIVE, self.owned(_RO))).all()
        return sorted(str(p) for p in pipelines), [dict(r._mapping) for r in active]

    def history(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_RO).where(self.owned(_RO)).order_by(_RO.c.id.desc()).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]

    def stop(
        self,
        *,
        reason: str,
        actor: str,
        status: str = STOPPED,
        approval_id: str | None = None,
        now: datetime | None = None,
        then: Callable[[Connection], Any] | None = None,
    ) -> dict[str, Any] | None:
        """End the active rollout (only the one beside `approval_id` when given), audited; None when there is none.
        `then` runs in the same transaction (the candidate's lifecycle move)."""
        with self.tx() as conn:
            ended = self.stop_in(conn, reason=reason, actor=actor, status=status, approval_id=approval_id, now=now)
            if then is not None:
                then(conn)
            return ended

    def stop_in(
        self,
        conn: Connection,
        *,
        reason: str,
        actor: str,
        status: str = STOPPED,
        approval_id: str | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any] | None:
        """`stop` inside the caller's transaction."""
        now = now or utcnow()
        ended = stop_active_in(
            conn, self.owner("stop a rollout"), reason=reason, status=status, approval_id=approval_id, now=now
        )
        if ended is not None:
            approval, detail = ended
            self._audit.append_in(
                conn,
                event=STOPPED_EVENT,
                request_id=approval,
                actor=actor,
                channel="rollout",
                outcome=status,
                detail=detail,
                now=now,
            )
            return detail
        return None

    def production_moved_in(
        self, conn: Connection, old: int | None, new: int | None, actor: str, approval_id: str | None = None
    ) -> None:
        """Production moved (inside the alias write's transaction): the rollout compared against the old one ends."""
        what = f"production moved from v{old} to v{new}" if new is not None else f"production v{old} was removed"
        self.stop_in(conn, reason=what, actor=actor)

    def end_overdue(self, now: datetime) -> list[int]:
        """Stop the active rollout whose max_duration has passed at `now`; the ids stopped. A ramp stage is not
        one of them: its deadline is judged with its evidence (`approvals/ramp.py`), so it never ends "completed"
        for having merely run out of time."""
        with self.tx() as conn:
            row = conn.execute(
                select(_RO.c.id, _RO.c.ends_at).where(
                    _RO.c.pipeline == self.owner("end rollouts"),
                    _RO.c.status == ACTIVE,
                    _RO.c.ends_at <= now,
                    _RO.c.stage.is_(None),
                )
            ).first()
            if row is None:
                return []
            reason = f"max_duration reached at {row.ends_at.isoformat()}"
            stopped = self.stop_in(conn, reason=reason, actor="deadline", status=COMPLETED, now=now)
        return [int(stopped["rollout_id"])] if stopped else []

    def record_shadow(self, rollout_id: int, *, overlap: float, production_s: float, candidate_s: float) -> None:
        """Add one shadow comparison to the rollout's sums (a stopped rollout still takes the last few in flight)."""
        ratio = math.log(max(candidate_s, 1e-6) / max(production_s, 1e-6))
        with self.tx() as conn:
            conn.execute(
                update(_RO)
                .where(_RO.c.id == rollout_id)
                .values(
                    shadow_queries=_RO.c.shadow_queries + 1,
                    shadow_overlap_sum=_RO.c.shadow_overlap_sum + overlap,
                    shadow_overlap_sq_sum=_RO.c.shadow_overlap_sq_sum + overlap * overlap,
                    shadow_log_latency_ratio_sum=_RO.c.shadow_log_latency_ratio_sum + ratio,
                    shadow_log_latency_ratio_sq_sum=_RO.c.shadow_log_latency_ratio_sq_sum + ratio * ratio,
                )
            )


def stop_active_in(
    conn: Connection,
    pipeline: str,
    *,
    reason: str,
    now: datetime,
    status: str = STOPPED,
    approval_id: str | None = None,
) -> tuple[str | None, dict[str, Any]] | None:
    """End `pipeline`'s active rollout (only the one beside `approval_id` when given) inside `conn`'s transaction:
    (its approval request, what happened), or None when there is none. Unaudited: the caller records it."""
    if status not in ENDED:
        raise ValueError(f"a rollout ends as one of {', '.join(ENDED)}, not {status!r}")
    where = [_RO.c.pipeline == pipeline, _RO.c.status == ACTIVE]
    if approval_id is not None:
        where.append(_RO.c.approval_id == approval_id)
    # Lock order: the request's row, then the rollout's (as the request's compensation takes them), so a production
    # move stopping this rollout while its request is compensated waits instead of deadlocking.
    beside = conn.execute(select(_RO.c.approval_id).where(and_(*where))).scalar()
    if beside is not None:
        conn.execute(select(_REQ.c.id).where(_REQ.c.id == beside).with_for_update())
    row = conn.execute(select(_RO).where(and_(*where)).with_for_update()).first()
    if row is None:
        return None
    conn.execute(update(_RO).where(_RO.c.id == row.id).values(status=status, reason=reason, ended_at=now))
    return row.approval_id, {"pipeline": pipeline, "rollout_id": row.id, "status": status, "reason": reason}


def stop_rollout_compensation(conn: Connection, request: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A request's compensation part: the rollout beside it stops (its `compensated` record says so)."""
    ended = stop_active_in(
        conn,
        request["pipeline"],
        reason=f"approval request {request['id']} was {request['status']}",
        approval_id=request["id"],
        now=now,
    )
    return {"rollout": ended[1] if ended else None}
