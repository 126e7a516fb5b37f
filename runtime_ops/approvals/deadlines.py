"""A request's deadlines, run on every approvals-sensor tick from state in the store (so each happens once, and a
restart loses nothing): escalate (the next tier of approvers joins), expire (fail closed: an undecided request is
rejected), and compensate (a request that ended without approval takes its candidate off the `canary` alias).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runtime_ops.approvals.requests import CANARY_COMPENSATION
from runtime_ops.store import remove_alias_compensation
from runtime_ops.store.approvals.deadlines import Deadlines
from runtime_ops.tags import CANARY_ALIAS

COMPENSATIONS: dict[str, Any] = {CANARY_COMPENSATION: remove_alias_compensation(CANARY_ALIAS)}


def run_deadlines(deadlines: Deadlines, now: datetime) -> dict[str, list[str]]:
    """The requests escalated, expired and compensated at `now`, by what happened to them."""
    return {
        "escalated": deadlines.escalate_due(now),
        "expired": deadlines.expire_due(now),
        "compensated": [rid for rid, _ in deadlines.compensate_due(COMPENSATIONS, now)],
    }
