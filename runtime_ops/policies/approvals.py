"""Who may decide a request and when it is decided: pure rules, no I/O.

A request carries its own policy (`RequestPolicy`), fixed when it opens, so changing RUNTIME_OPS_APPROVERS
later never changes the rules of a request already waiting. `authorise` and `tally` run inside the store's
vote transaction (`StateStore.votes.cast_vote`), under the request row's lock: they read the vote counts that lock
protects, which is what makes concurrent clicks yield exactly one outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class RequestPolicy:
    approvers: tuple[str, ...] = ()  # empty: anyone who can reach the gate may decide (embedded mode)
    escalation_approvers: tuple[str, ...] = ()
    required_approvals: int = 1
    escalate_after: timedelta | None = None
    expire_after: timedelta | None = None

    def __post_init__(self) -> None:
        if self.required_approvals < 1:
            raise ValueError("required_approvals must be at least 1")
        allowed = len(set(self.approvers) | set(self.escalation_approvers))
        if allowed and self.required_approvals > allowed:
            raise ValueError(
                f"required_approvals={self.required_approvals} but only {allowed} approvers are configured "
                "(RUNTIME_OPS_APPROVERS + RUNTIME_OPS_ESCALATION_APPROVERS)"
            )

    def deadlines(self, opened_at: datetime) -> tuple[datetime | None, datetime | None]:
        escalate = opened_at + self.escalate_after if self.escalate_after else None
        expire = opened_at + self.expire_after if self.expire_after else None
        return escalate, expire

    def to_columns(self, opened_at: datetime) -> dict[str, Any]:
        escalate_at, expire_at = self.deadlines(opened_at)
        return {
            "approvers": list(self.approvers),
            "escalation_approvers": list(self.escalation_approvers),
            "required_approvals": self.required_approvals,
            "escalate_at": escalate_at,
            "expire_at": expire_at,
        }


@dataclass(frozen=True)
class Refusal:
    outcome: str  # unauthorised | self_approval | duplicate_vote | expired
    message: str


def allowed_approvers(request: Mapping[str, Any]) -> set[str]:
    allowed = set(request.get("approvers") or [])
    if request.get("escalated_at"):
        allowed |= set(request.get("escalation_approvers") or [])
    return allowed


def authorise(request: Mapping[str, Any], actor: str, already_voted: bool, now: datetime) -> Refusal | None:
    """Why `actor` may not vote on `request` now, or None when the vote counts."""
    expire_at = request.get("expire_at")
    if expire_at is not None and now >= expire_at:
        return Refusal("expired", f"{request['id']} expired at {expire_at:%Y-%m-%d %H:%M} UTC without a decision")
    allowed = allowed_approvers(request)
    if allowed and actor not in allowed:
        later = set(request.get("escalation_approvers") or []) - allowed
        hint = " (escalation approvers join after the escalation deadline)" if actor in later else ""
        return Refusal("unauthorised", f"{actor} is not an approver of {request['id']}{hint}")
    if actor == request.get("requested_by"):
        return Refusal("self_approval", f"{actor} requested {request['id']} and may not decide it (four eyes)")
    if already_voted:
        return Refusal("duplicate_vote", f"{actor} already voted on {request['id']}")
    return None


def tally(approvals: int, rejects: int, required: int) -> str:
    """`rejected` on any reject, `approved` with `required` distinct approvals, else `pending`."""
    if rejects:
        return "rejected"
    return "approved" if approvals >= required else "pending"
