"""Who may decide a request and when it is decided: pure rules, no I/O.

A request carries its own policy (`RequestPolicy`), fixed when it opens, so changing RUNTIME_OPS_APPROVERS
later never changes the rules of a request already waiting. `authorise` and `tally` run inside the store's
vote transaction (`StateStore.votes.cast_vote`), under the request row's lock: they read the vote counts that lock
protects, which is what makes concurrent clicks yield exactly one outcome.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Tier:
    """An escalation tier: who else may decide once the request has waited `after` since it opened."""

    approvers: tuple[str, ...]
    after: timedelta


@dataclass(frozen=True)
class RequestPolicy:
    approvers: tuple[str, ...] = ()  # empty: anyone who can reach the gate may decide (embedded mode)
    escalation_approvers: tuple[str, ...] = ()  # the one tier of RUNTIME_OPS_ESCALATION_APPROVERS ...
    required_approvals: int = 1
    escalate_after: timedelta | None = None  # ... after RUNTIME_OPS_ESCALATE_AFTER
    expire_after: timedelta | None = None
    # Several tiers (approvals.escalation in defs.yaml), each joining on its own deadline; they replace the one above.
    tiers: tuple[Tier, ...] = ()

    def __post_init__(self) -> None:
        if self.required_approvals < 1:
            raise ValueError("required_approvals must be at least 1")
        if not self.tiers and self.escalate_after:  # no escalation approvers: the tier reminds the approvers
            object.__setattr__(self, "tiers", (Tier(tuple(self.escalation_approvers), self.escalate_after),))
        afters = [t.after for t in self.tiers]
        if any(b <= a for a, b in itertools.pairwise(afters)) or any(a <= timedelta(0) for a in afters):
            raise ValueError("escalation tiers must come after one another: each `after` later than the one before")
        if self.expire_after and afters and afters[-1] >= self.expire_after:
            raise ValueError(
                f"the last escalation tier ({afters[-1]}) must come before the request expires ({self.expire_after})"
            )
        allowed = len(self.deciders)
        if allowed and self.required_approvals > allowed:
            raise ValueError(
                f"required_approvals={self.required_approvals} but only {allowed} approvers are configured "
                "(RUNTIME_OPS_APPROVERS + the escalation approvers)"
            )

    @property
    def deciders(self) -> frozenset[str]:
        """Everyone who can ever decide a request: the approvers and every escalation tier's (empty: anyone)."""
        return frozenset(self.approvers).union(*(t.approvers for t in self.tiers))

    def deadlines(self, opened_at: datetime) -> tuple[datetime | None, datetime | None]:
        escalate = opened_at + self.tiers[0].after if self.tiers else None
        expire = opened_at + self.expire_after if self.expire_after else None
        return escalate, expire

    def to_columns(self, opened_at: datetime) -> dict[str, Any]:
        escalate_at, expire_at = self.deadlines(opened_at)
        return {
            "approvers": list(self.approvers),
            "escalation_approvers": sorted(set().union(*(t.approvers for t in self.tiers))),
            "escalation_tiers": [
                {"approvers": list(t.approvers), "at": (opened_at + t.after).isoformat()} for t in self.tiers
            ],
            "escalation_tier": 0,
            "required_approvals": self.required_approvals,
            "escalate_at": escalate_at,
            "expire_at": expire_at,
        }


def request_tiers(request: Mapping[str, Any]) -> list[tuple[tuple[str, ...], datetime | None]]:
    """The request's tiers as (approvers, deadline); a request of an earlier release has its one tier."""
    stored = request.get("escalation_tiers")
    if stored:
        return [(tuple(t["approvers"]), datetime.fromisoformat(t["at"])) for t in stored]
    if request.get("escalation_approvers"):
        at = request.get("escalate_at") or request.get("escalated_at")
        return [(tuple(request["escalation_approvers"]), at)]
    return []


def reached_tiers(request: Mapping[str, Any]) -> int:
    """How many escalation tiers have joined (their deadline passed and the escalation was recorded)."""
    if request.get("escalation_tiers"):
        return int(request.get("escalation_tier") or 0)
    return 1 if request.get("escalated_at") else 0


def escalations_due(request: Mapping[str, Any], now: datetime) -> list[int]:
    """The indexes of the tiers whose deadline passed by `now` and that have not joined yet, in order."""
    reached = reached_tiers(request)
    return [i for i, (_, at) in enumerate(request_tiers(request)) if i >= reached and at is not None and at <= now]


@dataclass(frozen=True)
class Refusal:
    outcome: str  # unauthorised | self_approval | duplicate_vote | expired
    message: str


def allowed_approvers(request: Mapping[str, Any]) -> set[str]:
    allowed = set(request.get("approvers") or [])
    for approvers, _ in request_tiers(request)[: reached_tiers(request)]:
        allowed |= set(approvers)
    return allowed


def authorise(request: Mapping[str, Any], actor: str, already_voted: bool, now: datetime) -> Refusal | None:
    """Why `actor` may not vote on `request` now, or None when the vote counts."""
    expire_at = request.get("expire_at")
    if expire_at is not None and now >= expire_at:
        return Refusal("expired", f"{request['id']} expired at {expire_at:%Y-%m-%d %H:%M} UTC without a decision")
    allowed = allowed_approvers(request)
    if allowed and actor not in allowed:
        later = {a for approvers, _ in request_tiers(request) for a in approvers} - allowed
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
