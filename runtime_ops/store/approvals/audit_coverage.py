"""The state the audit log accounts for: rows that cannot exist without their audit records.

Each row below is written in the transaction that appends its record (or, for a promotion, after it), so a row
without its record means records were deleted. The chain and its heads cannot show that when the records and
the heads went together, and the anchors cannot when they are gone too: the rows can, for whoever empties the
log leaves the requests, votes and used links it was about.

    a request                         -> request_opened                      (every one)
    a request superseded / expired    -> superseded / expired
    a human request approved/rejected -> decided, with that outcome
    escalated / notified / escalation notified / compensated -> escalated / notified / escalation_notified /
                                         compensated
    a counted vote                    -> an accepted or recorded attempt by its voter, at its time
    a used link nonce                 -> an attempt by its approver, at its time
    a Slack delivery                  -> an attempt with the outcome it answered, at its time
    a promotion saga that announced   -> promoted (and promotion_retracted once compensated)
    a candidate's lifecycle state     -> the lifecycle record that moved it there, at its time
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, exists, literal, select
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t

_R, _V, _L = t.approval_requests, t.approval_votes, t.audit_log
_U, _D, _S = t.link_uses, t.interaction_deliveries, t.sagas
# The promotion saga of request R is `promote-R` (models/promotion_saga.saga_id; the store cannot import models).
PROMOTION_SAGA_PREFIX = "promote-"
_LOST = "the audit log lost records (emptied, or cut short together with its heads)"


@dataclass(frozen=True)
class Obligation:
    """Rows that must each have a record: `lacking` selects those that do not, `says` names one of them."""

    lacking: Select[Any]
    says: Callable[[Any], str]


def _record(*where: ColumnElement[bool]) -> ColumnElement[bool]:
    return exists().where(*where)


def _request_event(event: str, *when: ColumnElement[bool], outcome: Any = None) -> Select[Any]:
    has = [_L.c.chain == _R.c.id, _L.c.event == event]
    if outcome is not None:
        has.append(_L.c.outcome == outcome)
    return select(_R.c.id, _R.c.status, _R.c.created_at).where(*when, ~_record(*has))


def _request_says(state: str, event: str) -> Callable[[Any], str]:
    return lambda row: f"approval request {row.id} {state.format(row=row)} but its audit chain has no {event} record"


_C = t.candidate_lifecycle

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        _request_event("request_opened"),
        _request_says("was opened at {row.created_at:%Y-%m-%d %H:%M:%S}", "request_opened"),
    ),
    Obligation(_request_event("superseded", _R.c.status == "superseded"), _request_says("is superseded", "superseded")),
    Obligation(_request_event("expired", _R.c.status == "expired"), _request_says("is expired", "expired")),
    Obligation(
        _request_event("decided", _R.c.kind == "human", _R.c.status.in_(("approved", "rejected")), outcome=_R.c.status),
        _request_says("is {row.status}", "decided"),
    ),
    Obligation(
        _request_event("escalated", _R.c.escalated_at.is_not(None)), _request_says("was escalated", "escalated")
    ),
    Obligation(_request_event("notified", _R.c.notified_at.is_not(None)), _request_says("was announced", "notified")),
    Obligation(
        _request_event("escalation_notified", _R.c.escalation_notified_at.is_not(None)),
        _request_says("had its escalation announced", "escalation_notified"),
    ),
    Obligation(
        _request_event("compensated", _R.c.compensated_at.is_not(None)), _request_says("was compensated", "compensated")
    ),
    Obligation(
        select(_V.c.request_id, _V.c.actor, _V.c.vote).where(
            ~_record(
                _L.c.chain == _V.c.request_id,
                _L.c.event == "attempt",
                _L.c.actor == _V.c.actor,
                _L.c.at == _V.c.created_at,
                _L.c.outcome.in_(("accepted", "recorded")),
            )
        ),
        lambda row: f"the {row.vote} vote of {row.actor} on {row.request_id} has no attempt record in its audit chain",
    ),
    Obligation(
        select(_U.c.request_id, _U.c.approver, _U.c.used_at).where(
            ~_record(
                _L.c.chain == _U.c.request_id,
                _L.c.event == "attempt",
                _L.c.actor == _U.c.approver,
                _L.c.at == _U.c.used_at,
            )
        ),
        lambda row: (
            f"the approval link {row.approver} used on {row.request_id} at {row.used_at:%Y-%m-%d %H:%M:%S} has no "
            "attempt record in its audit chain"
        ),
    ),
    Obligation(
        select(_D.c.request_id, _D.c.outcome, _D.c.created_at).where(
            ~_record(
                _L.c.request_id == _D.c.request_id,
                _L.c.event == "attempt",
                _L.c.outcome == _D.c.outcome,
                _L.c.at == _D.c.created_at,
            )
        ),
        lambda row: (
            f"the Slack click on {row.request_id} answered {row.outcome} at {row.created_at:%Y-%m-%d %H:%M:%S} has "
            "no attempt record"
        ),
    ),
    Obligation(
        select(_C.c.approval_id, _C.c.state).where(
            ~_record(
                _L.c.chain == _C.c.approval_id,
                _L.c.event == "lifecycle",
                _L.c.outcome == _C.c.state,
                _L.c.at == _C.c.updated_at,
            )
        ),
        lambda row: f"the candidate of {row.approval_id} is {row.state} but its audit chain has no lifecycle record",
    ),
)


def _announced(conn: Connection) -> Iterator[tuple[str, str, str]]:
    """(request id, event, what) for every record a promotion saga's journal says was appended: its announce step
    ran (`promoted`) and, when compensated, was retracted (`promotion_retracted`). The journal is saved after each
    step, so a step it lists ran to the end."""
    sagas = select(_R.c.id, _S.c.steps).join(_S, _S.c.id == literal(PROMOTION_SAGA_PREFIX).concat(_R.c.id))
    for row in conn.execute(sagas):
        for step in row.steps or []:
            if step.get("name") == "announce":
                yield row.id, "promoted", "announced its promotion"
                if step.get("status") == "compensated":
                    yield row.id, "promotion_retracted", "retracted its promotion"


def first_missing(conn: Connection) -> str | None:
    """What the first row without its audit record is, or None when every one has its record."""
    for obligation in OBLIGATIONS:
        rows = conn.execute(obligation.lacking.limit(2)).all()
        if rows:
            more = " (and more like it)" if len(rows) > 1 else ""
            return f"{obligation.says(rows[0])}{more}: {_LOST}"
    for request_id, event, what in _announced(conn):
        has = select(_L.c.id).where(and_(_L.c.chain == request_id, _L.c.event == event)).limit(1)
        if conn.execute(has).first() is None:
            return f"the promotion saga of {request_id} {what} but its audit chain has no {event} record: {_LOST}"
    return None
