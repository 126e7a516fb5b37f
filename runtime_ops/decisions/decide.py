"""`decide`: the one call that counts an approve/reject attempt, whichever channel it came from.

Slack clicks (`api/routes/slack.py`), signed links (`api/routes/approval_pages.py`) and the CLI
(`runtime-ops approvals approve|reject`) each authenticate their caller their own way, then call `decide`,
and render the `DecisionOutcome` it returns (a Slack message update or ephemeral, an HTML page, a line of
text). `refuse` audits the attempts that are refused before they can name a request (a forged or malformed
Slack request, a tampered or expired link), so every attempt leaves an audit record. `decide_by_policy` is the
decision a rule takes on a pending request instead of a person (the online half of the gate: actor
`policy:online`), through the same store, audit chain and trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from runtime_ops.observability.tracing import record_approval_decision

Channel = Literal["slack", "link", "cli", "api", "policy"]
Vote = Literal["approve", "reject"]
VOTES: frozenset[str] = frozenset({"approve", "reject"})

# Refusals caused by the request's state rather than by who asked: nothing to fix about the caller (HTTP 409).
CONFLICTS = frozenset({"already_decided", "link_reused", "wrong_digest", "expired"})


class VoteResult(Protocol):
    """What `StateStore.votes.cast_vote` returns (read-only here)."""

    @property
    def outcome(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def request(self) -> dict[str, Any] | None: ...


class VoteCaster(Protocol):
    """`StateStore.votes`: the call that counts one attempt."""

    def cast_vote(
        self,
        request_id: str,
        *,
        actor: str,
        approve: bool,
        channel: str,
        reason: str | None = ...,
        now: datetime | None = ...,
        dedupe_key: str | None = ...,
        link_nonce: str | None = ...,
        link_digest: str | None = ...,
    ) -> VoteResult: ...


class PolicyDecider(Protocol):
    """`StateStore.votes`: the call by which a rule decides a pending request."""

    def decide_by_policy(
        self,
        request_id: str,
        *,
        actor: str,
        approve: bool,
        reason: str,
        detail: dict[str, Any],
        now: datetime | None = ...,
    ) -> VoteResult: ...


class PolicyDecisionStore(Protocol):
    @property
    def votes(self) -> PolicyDecider: ...


class AuditAppender(Protocol):
    """`StateStore.audit_log`: the call that appends one audit record."""

    def append(self, **fields: Any) -> dict[str, Any]: ...


class DecisionStore(Protocol):
    """The two state-store repositories a decision needs (`runtime_ops.store.StateStore` has both)."""

    @property
    def votes(self) -> VoteCaster: ...

    @property
    def audit_log(self) -> AuditAppender: ...


@dataclass(frozen=True)
class DecisionOutcome:
    """What one attempt did, for the caller to render.

    `outcome` is one of: accepted (this vote decided the request) | recorded (counted, more approvals needed) |
    already_decided | unknown_request | unauthorised | self_approval | duplicate_vote | expired | link_reused |
    wrong_digest | duplicate_delivery (Slack redelivered a click already counted; `message` is the first answer).
    """

    outcome: str
    message: str
    request: dict[str, Any] | None
    vote: Vote

    @property
    def counted(self) -> bool:
        return self.outcome in ("accepted", "recorded")

    @property
    def decided(self) -> bool:
        """This attempt moved the request out of pending (approved or rejected)."""
        return self.outcome == "accepted"

    @property
    def redelivered(self) -> bool:
        return self.outcome == "duplicate_delivery"

    @property
    def conflict(self) -> bool:
        return self.outcome in CONFLICTS


def decide(
    store: DecisionStore,
    request_id: str,
    *,
    actor: str,
    vote: Vote,
    channel: Channel,
    now: datetime,
    reason: str | None = None,
    dedupe_key: str | None = None,
    link_nonce: str | None = None,
    link_digest: str | None = None,
) -> DecisionOutcome:
    """Count `actor`'s `vote` on `request_id`, audit it and trace it.

    One store transaction does the work (`StateStore.votes.cast_vote`): it locks the request row, applies
    `policies.approvals` (`authorise`, then `tally`), writes the vote and the compare-and-set outcome, claims the
    link nonce or Slack delivery key, and appends the attempt to the request's audit chain. Then the
    `approval.decision` span is recorded, linked to the span that opened the request.

    `actor` must already be authenticated by the caller: Slack by signature, a link by its signature (the
    approver it names), the CLI by its operator. `dedupe_key` (Slack) makes a redelivered click a no-op;
    `link_nonce`/`link_digest` make a link single use and bound to the candidate it was issued for.
    """
    if vote not in VOTES:
        raise ValueError(f"unknown vote {vote!r}; use approve or reject")
    start = time.time_ns()
    result = store.votes.cast_vote(
        request_id,
        actor=actor,
        approve=vote == "approve",
        channel=channel,
        reason=reason,
        now=now,
        dedupe_key=dedupe_key,
        link_nonce=link_nonce,
        link_digest=link_digest,
    )
    # After the transaction, with the attempt's start time: the span's link needs the request row, which the
    # vote already read under its lock, so tracing adds no read to the click path.
    record_approval_decision(
        result.request,
        request_id=request_id,
        channel=channel,
        action=vote,
        outcome=result.outcome,
        start_time_ns=start,
        now=now,
    )
    return DecisionOutcome(result.outcome, result.message, result.request, vote)


def decide_by_policy(
    store: PolicyDecisionStore,
    request_id: str,
    *,
    actor: str,
    vote: Vote,
    reason: str,
    now: datetime,
    detail: dict[str, Any] | None = None,
) -> DecisionOutcome:
    """A policy (`actor`, e.g. `policy:online`) approves or rejects pending `request_id`: one compare-and-set with
    its audit record (`StateStore.votes.decide_by_policy`; a request already decided stays as it is), traced like a
    person's decision. No approver list or four-eyes rule applies: the rule is the decider, as for auto-approval."""
    if vote not in VOTES:
        raise ValueError(f"unknown vote {vote!r}; use approve or reject")
    start = time.time_ns()
    result = store.votes.decide_by_policy(
        request_id, actor=actor, approve=vote == "approve", reason=reason, detail=detail or {}, now=now
    )
    record_approval_decision(
        result.request,
        request_id=request_id,
        channel="policy",
        action=vote,
        outcome=result.outcome,
        start_time_ns=start,
        now=now,
    )
    return DecisionOutcome(result.outcome, result.message, result.request, vote)


def refuse(audit: AuditAppender, *, channel: str, outcome: str, detail: dict[str, Any], now: datetime) -> None:
    """Audit an attempt refused before it could name a request (it joins the global audit chain)."""
    audit.append(event="attempt", channel=channel, outcome=outcome, detail=detail, now=now)
