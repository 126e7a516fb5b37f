"""The decision path on the embedded SQLite store (make dev's default): the same statements one by one."""

from __future__ import annotations

from pathlib import Path

from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.approvals_support import open_pending


def test_votes_redelivery_and_audit_on_sqlite(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U1", "U2", "U3"), required_approvals=2))
    rid = request["id"]
    first = store.votes.cast_vote(rid, actor="U1", approve=True, channel="slack", dedupe_key="m:1:U1")
    assert first.outcome == "recorded" and first.request["status"] == "pending"
    again = store.votes.cast_vote(rid, actor="U1", approve=True, channel="slack", dedupe_key="m:1:U1")
    assert again.outcome == "duplicate_delivery" and again.message == first.message
    assert store.votes.cast_vote(rid, actor="U9", approve=True, channel="slack").outcome == "unauthorised"
    done = store.votes.cast_vote(rid, actor="U2", approve=True, channel="cli", reason="fine")
    assert done.outcome == "accepted" and done.request["decided_by"] == "U1, U2"
    stored = store.requests.get_request(rid)
    assert stored["status"] == "approved" and stored["decision_reason"] == "fine"
    assert [v["actor"] for v in store.votes.for_request(rid)] == ["U1", "U2"]
    events = [(r["event"], r["outcome"]) for r in store.audit_log.records(rid)]
    assert events == [
        ("request_opened", "pending"),
        ("lifecycle", "pending"),  # the candidate enters its lifecycle with the request
        ("attempt", "recorded"),
        ("attempt", "unauthorised"),
        ("attempt", "accepted"),
        ("decided", "approved"),
        ("lifecycle", "approved"),  # moved in the decision's transaction
    ]
    assert store.audit_log.records(rid)[-1]["at"].tzinfo is not None
    assert store.audit_log.verify().ok
    assert store.votes.cast_vote(rid, actor="U3", approve=False, channel="slack").outcome == "already_decided"
    assert store.requests.get_request(rid)["status"] == "approved"
