"""A request's deadlines, run on every approvals-sensor tick from state in the store (so each happens once, and a
restart loses nothing): escalate (the next tier of approvers joins), expire (fail closed: an undecided request is
rejected), compensate (a request that ended without approval takes its candidate off the `canary` alias and stops
the rollout beside it, in the transaction that records the compensation), and end rollouts past their max_duration.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from runtime_ops.approvals.requests import CANARY_COMPENSATION
from runtime_ops.store import remove_alias_compensation, stop_rollout_compensation
from runtime_ops.store.approvals.deadlines import Deadlines
from runtime_ops.store.serving.rollouts import Rollouts
from runtime_ops.tags import CANARY_ALIAS

_remove_canary = remove_alias_compensation(CANARY_ALIAS)


def _end_canary(conn: Connection, request: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The candidate leaves the `canary` alias and live traffic: its rollout stops with the same commit (the
    `compensated` record says so, under `rollout`)."""
    return {**_remove_canary(conn, request, now), **stop_rollout_compensation(conn, request, now)}


COMPENSATIONS: dict[str, Any] = {CANARY_COMPENSATION: _end_canary}


def run_deadlines(deadlines: Deadlines, rollouts: Rollouts, now: datetime) -> dict[str, list[str]]:
    """The requests escalated, expired and compensated at `now`, by what happened to them."""
    return {
        "escalated": deadlines.escalate_due(now),
        "expired": deadlines.expire_due(now),
        "compensated": [rid for rid, _ in deadlines.compensate_due(COMPENSATIONS, now)],
        "rollouts_ended": [f"rollout #{rid}" for rid in rollouts.end_overdue(now)],
    }
