"""The one writer of the candidate lifecycle (`candidate_lifecycle`): every move a caller requests is checked by the
pure machine (`runtime_ops/lifecycle/machine.py`) against the row, read under a row lock, and written with its audit
record on the request's chain, in the caller's transaction (`*_in`) or its own. A refused move raises
`TransitionRefused` and writes nothing, so the event behind it (a decision, a ramp stage, an alias move) rolls back
with it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, insert, select, update
from sqlalchemy.engine import Connection

from runtime_ops.lifecycle.machine import (
    APPROVED,
    HALTED,
    IN_FLIGHT,
    PROMOTED,
    RAMPING,
    SUPERSEDED,
    Facts,
    Position,
    TransitionRefused,
    describe,
    initial,
    move,
)
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository, row_dict

_L = t.candidate_lifecycle
EVENT = "lifecycle"

# Request statuses the approval store writes, as the lifecycle moves they are.
STATUS_MOVES = {"approved": "approve", "rejected": "reject", "expired": "expire", "superseded": "supersede"}


def position_of(row: dict[str, Any]) -> Position:
    return Position(str(row["state"]), row["stage"], bool(row["skip_ramp"]))


# (transaction, pipeline, approval id, why, actor): stops the rollout beside a superseded candidate (the store wires
# Rollouts.stop_in). A rejection, an expiry and a ramp's loss stop theirs where they happen (the compensation, the
# online gate, the ramp).
SupersededHook = Callable[[Connection, str, str, str, str], Any]


class Lifecycle(Repository):
    def __init__(
        self, engine: Engine, pipeline: str | None, audit: Audit, on_superseded: SupersededHook | None = None
    ) -> None:
        super().__init__(engine, pipeline)
        self._audit = audit
        self._on_superseded = on_superseded

    # ------------------------------------------------------------------ reads
    def get(self, approval_id: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            return self.get_in(conn, approval_id)

    def get_in(self, conn: Connection, approval_id: str, *, lock: bool = False) -> dict[str, Any] | None:
        q = select(_L).where(_L.c.approval_id == approval_id, self.owned(_L))
        return row_dict(conn.execute(q.with_for_update() if lock else q).first())

    def in_states(self, states: frozenset[str] | tuple[str, ...] = IN_FLIGHT) -> list[dict[str, Any]]:
        """The scope's candidates in `states`, oldest first."""
        with self.tx() as conn:
            q = select(_L).where(_L.c.state.in_(tuple(states)), self.owned(_L)).order_by(_L.c.created_at)
            return [dict(r._mapping) for r in conn.execute(q)]

    def history(self, limit: int = 50) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_L).where(self.owned(_L)).order_by(_L.c.created_at.desc()).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]

    # ------------------------------------------------------------------ writes
    def open_in(self, conn: Connection, request: dict[str, Any], now: datetime) -> None:
        """A model-promotion request opened: its candidate enters the machine (pending, or approved by policy)."""
        start = initial(approved_by_policy=request["status"] == "approved")
        conn.execute(
            insert(_L).values(
                approval_id=request["id"],
                pipeline=self.owner("open a candidate's lifecycle"),
                candidate_version=int(request["candidate_version"]),
                state=start.state,
                stage=None,
                skip_ramp=False,
                reason=request.get("decision_reason") or "request opened",
                actor=str(request.get("decided_by") or request["requested_by"]),
                created_at=now,
                updated_at=now,
            )
        )
        self._audit.append_in(
            conn,
            event=EVENT,
            request_id=request["id"],
            actor=str(request.get("decided_by") or request["requested_by"]),
            channel=EVENT,
            outcome=start.state,
            detail={"move": "open", "from": None, "to": describe(start)},
            now=now,
        )

    def move_in(
        self,
        conn: Connection,
        approval_id: str,
        event: str,
        *,
        actor: str,
        reason: str,
        facts: Facts = Facts(),
        stage: int | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any] | None:
        """Apply `event` to the candidate of `approval_id` inside `conn`'s transaction: its new row, None when the
        request has no lifecycle (not a model promotion, or opened before the lifecycle existed), TransitionRefused
        when the machine says no."""
        now = now or utcnow()
        row = self.get_in(conn, approval_id, lock=True)
        if row is None:
            return None
        before = position_of(row)
        after = move(before, event, facts, stage=stage)
        done = conn.execute(
            update(_L)
            .where(and_(_L.c.approval_id == approval_id, _L.c.state == before.state))
            .values(
                state=after.state,
                stage=after.stage,
                skip_ramp=after.skip_ramp,
                reason=reason,
                actor=actor,
                updated_at=now,
            )
        )
        if done.rowcount != 1:  # another writer moved it between the read and the write
            raise TransitionRefused(before, event, "it moved meanwhile; read it again")
        if after.state == SUPERSEDED and self._on_superseded is not None:
            # Nothing of a superseded candidate serves on: its rollout or ramp stage stops in the same transaction.
            self._on_superseded(conn, str(row["pipeline"]), approval_id, reason, actor)
        self._audit.append_in(
            conn,
            event=EVENT,
            request_id=approval_id,
            actor=actor,
            channel=EVENT,
            outcome=after.state,
            detail={"move": event, "from": describe(before), "to": describe(after), "reason": reason},
            now=now,
        )
        return {**row, "state": after.state, "stage": after.stage, "skip_ramp": after.skip_ramp, "reason": reason}

    def move_to(
        self,
        approval_id: str,
        event: str,
        *,
        actor: str,
        reason: str,
        facts: Facts = Facts(),
        stage: int | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any] | None:
        """`move_in` in a transaction of its own."""
        with self.tx() as conn:
            return self.move_in(conn, approval_id, event, actor=actor, reason=reason, facts=facts, stage=stage, now=now)

    def follow_status_in(
        self, conn: Connection, approval_id: str, status: str, *, actor: str, reason: str, now: datetime
    ) -> None:
        """The request's status was just written in `conn`'s transaction: its candidate moves with it."""
        event = STATUS_MOVES.get(status)
        if event is not None:
            self.move_in(conn, approval_id, event, actor=actor, reason=reason, now=now)

    def supersede_unlaunched_in(self, conn: Connection, newer: str, *, actor: str, now: datetime) -> list[str]:
        """A newer candidate's request `newer` opened: the scope's approved, ramping or halted candidates end
        superseded (pending ones follow their request's own supersession)."""
        q = select(_L.c.approval_id).where(
            and_(_L.c.state.in_((APPROVED, RAMPING, HALTED)), _L.c.approval_id != newer, self.owned(_L))
        )
        ended = [r.approval_id for r in conn.execute(q)]
        for approval_id in ended:
            self.move_in(conn, approval_id, "supersede", actor=actor, reason=f"superseded by {newer}", now=now)
        return ended

    def production_moved_in(
        self, conn: Connection, old: int | None, new: int | None, actor: str, approval_id: str | None
    ) -> None:
        """Production moved (inside the alias write's transaction). A promotion's move is its candidate's `promoted`
        (refused unless its promotion was launched: the alias write rolls back with it); a rollback's (actor
        `rollback:...`) rolls the candidate in production back; a compensation returns a promoted candidate to
        `promoting`, to be tried again."""
        if new is None or approval_id is None:
            return
        if actor.startswith("rollback:"):
            self._roll_back_in(conn, old, actor, f"production rolled back from v{old} to v{new} ({approval_id})")
            return
        row = self.get_in(conn, approval_id, lock=True)
        if row is None:
            return
        if actor == "compensation":
            if row["state"] == PROMOTED and int(row["candidate_version"]) == old:
                why = "the promotion saga undid its alias move; it is tried again"
                self.move_in(conn, approval_id, "compensate", actor=actor, reason=why)
            return
        if int(row["candidate_version"]) == new and row["state"] != PROMOTED:
            self.move_in(conn, approval_id, "promoted", actor=actor, reason=f"production v{old} -> v{new}")

    def _roll_back_in(self, conn: Connection, version: int | None, actor: str, reason: str) -> None:
        if version is None:
            return
        q = (
            select(_L.c.approval_id)
            .where(and_(_L.c.state == PROMOTED, _L.c.candidate_version == version, self.owned(_L)))
            .order_by(_L.c.updated_at.desc())
        )
        found = conn.execute(q.limit(1)).first()
        if found is not None:
            self.move_in(conn, found.approval_id, "rollback", actor=actor, reason=reason)
