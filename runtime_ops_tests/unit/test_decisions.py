"""`decide` against a stand-in store (what it passes on, what it returns, the span it records) and the pure
link preview. The real store's vote is covered end to end by the Slack, link and CLI tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from runtime_ops.decisions.decide import decide, refuse
from runtime_ops.decisions.preview import link_state
from runtime_ops.observability import tracing

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class _Result:
    outcome: str
    message: str
    request: dict[str, Any] | None


@dataclass
class _Store:
    outcome: str = "accepted"
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)

    def cast_vote(self, request_id: str, **kw: Any) -> _Result:
        self.calls.append((request_id, kw))
        return _Result(self.outcome, f"{request_id}: {self.outcome}", {"id": request_id, "status": "approved"})

    @property
    def votes(self) -> _Store:  # StateStore.votes.cast_vote
        return self

    @property
    def audit_log(self) -> _Store:  # StateStore.audit_log.append
        return self

    def append(self, **fields: Any) -> dict[str, Any]:
        self.audits.append(fields)
        return fields


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = tracing.install_memory_exporter()
    exporter.clear()
    yield exporter
    exporter.clear()


def test_decide_passes_the_attempt_to_the_store_and_records_one_span(spans) -> None:
    store = _Store()
    outcome = decide(store, "apr-1", actor="U1", vote="reject", channel="link", now=NOW, reason="no", link_nonce="n")
    [(request_id, kw)] = store.calls
    assert request_id == "apr-1"
    assert kw == {
        "actor": "U1",
        "approve": False,
        "channel": "link",
        "reason": "no",
        "now": NOW,
        "dedupe_key": None,
        "link_nonce": "n",
        "link_digest": None,
    }
    assert (outcome.outcome, outcome.vote, outcome.counted, outcome.decided) == ("accepted", "reject", True, True)
    [span] = [s for s in spans.get_finished_spans() if s.name == "approval.decision"]
    assert span.attributes["approval.channel"] == "link" and span.attributes["approval.action"] == "reject"


@pytest.mark.parametrize(
    ("outcome", "counted", "conflict", "redelivered"),
    [
        ("recorded", True, False, False),
        ("already_decided", False, True, False),
        ("link_reused", False, True, False),
        ("wrong_digest", False, True, False),
        ("expired", False, True, False),
        ("unauthorised", False, False, False),
        ("self_approval", False, False, False),
        ("duplicate_delivery", False, False, True),
    ],
)
def test_outcome_classes(outcome: str, counted: bool, conflict: bool, redelivered: bool) -> None:
    result = decide(_Store(outcome=outcome), "apr-1", actor="U1", vote="approve", channel="slack", now=NOW)
    assert (result.counted, result.conflict, result.redelivered, result.decided) == (
        counted,
        conflict,
        redelivered,
        False,
    )


def test_an_unknown_vote_is_refused_before_the_store_is_touched() -> None:
    store = _Store()
    with pytest.raises(ValueError, match="approve or reject"):
        decide(store, "apr-1", actor="U1", vote="maybe", channel="cli", now=NOW)  # type: ignore[arg-type]
    assert store.calls == []


def test_refuse_audits_an_attempt_without_a_request() -> None:
    store = _Store()
    refuse(store, channel="slack", outcome="forged", detail={"reason": "signature does not match"}, now=NOW)
    assert store.audits == [
        {
            "event": "attempt",
            "channel": "slack",
            "outcome": "forged",
            "detail": {"reason": "signature does not match"},
            "now": NOW,
        }
    ]


def test_link_state() -> None:
    pending = {"candidate_digest": "d1", "status": "pending"}
    assert link_state(None, link_digest="d1", link_used=False) == "unknown_request"
    assert link_state(pending, link_digest="d1", link_used=True) == "link_used"
    assert link_state(pending, link_digest="d2", link_used=False) == "candidate_changed"
    assert link_state({**pending, "status": "approved"}, link_digest="d1", link_used=False) == "already_decided"
    assert link_state(pending, link_digest="d1", link_used=False) == "open"
