"""The soak's history checker on histories made by hand: a clean one passes, and each way of losing, doubling or
leaving work half-done is reported naming the record (runtime_ops_tests/soak/checker.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from runtime_ops_tests.soak.checker import check
from runtime_ops_tests.soak.history import Call, Fault, Final, History, Landed

DIGEST_1, DIGEST_2 = "a" * 64, "b" * 64


def clean() -> History:
    """Two documents (one corrupt, quarantined), one changed; v2 promoted by a 1-of-1 Slack approval; feedback and an
    alert acknowledged; one fault, and the one 5xx inside its window."""
    return History(
        seed=7,
        minutes=1.0,
        faults=[Fault(id=1, kind="kill_ops_api", target="ops_api", start=10.0, end=12.0, recovered=13.0, seed=7)],
        landed=[
            Landed(t=1.0, key="landing/a.md", op="put", version="e1"),
            Landed(t=2.0, key="landing/bad.pdf", op="put", version="e2", corrupt=True),
            Landed(t=3.0, key="landing/a.md", op="put", version="e3"),
            Landed(t=4.0, key="landing/gone.md", op="put", version="e4"),
            Landed(t=4.5, key="landing/gone.md", op="delete"),
        ],
        calls=[
            Call(t=5.0, what="search", status=200, latency_ms=40.0),
            Call(t=11.0, what="search", status=503, latency_ms=5.0),
            Call(
                t=6.0,
                what="feedback",
                status=201,
                latency_ms=9.0,
                record={"request_id": "q_1", "chunk_id": 3, "signal": "click"},
            ),
            Call(
                t=7.0,
                what="alert",
                status=200,
                latency_ms=9.0,
                record={"fingerprint": "fp1", "starts_at": "2026-12-05T10:00:00+00:00"},
            ),
            Call(
                t=8.0,
                what="decision",
                status=200,
                latency_ms=30.0,
                channel="slack",
                record={"request_id": "ar_2", "actor": "U2", "dedupe_key": "k1"},
            ),
            Call(
                t=9.0,
                what="decision",
                status=409,
                latency_ms=30.0,
                channel="api",
                outcome="already_decided",
                record={"request_id": "ar_2", "actor": "U3"},
            ),
        ],
        final=Final(
            documents=[
                {"id": 1, "key": "landing/a.md", "version": "e1", "status": "superseded", "reason": None},
                {"id": 2, "key": "landing/bad.pdf", "version": "e2", "status": "quarantined", "reason": "not a PDF"},
                {"id": 3, "key": "landing/a.md", "version": "e3", "status": "ok", "reason": None},
                {"id": 4, "key": "landing/gone.md", "version": "e4", "status": "deleted", "reason": None},
            ],
            requests=[
                {
                    "id": "ar_1",
                    "candidate_version": 1,
                    "candidate_digest": DIGEST_1,
                    "live_digest": DIGEST_1,
                    "status": "approved",
                    "kind": "policy",
                    "required_approvals": 1,
                },
                {
                    "id": "ar_2",
                    "candidate_version": 2,
                    "candidate_digest": DIGEST_2,
                    "live_digest": DIGEST_2,
                    "status": "approved",
                    "kind": "human",
                    "required_approvals": 1,
                },
            ],
            votes=[{"request_id": "ar_2", "actor": "U2", "vote": "approve", "channel": "slack"}],
            deliveries=[{"dedupe_key": "k1", "request_id": "ar_2", "outcome": "accepted"}],
            production_changes=[
                {"id": 1, "old_target": None, "new_target": 1, "approval_id": "ar_1", "actor": "policy"},
                {"id": 2, "old_target": 1, "new_target": 2, "approval_id": "ar_2", "actor": "U2"},
            ],
            production=2,
            serving_version=2,
            audit_production=2,
            audit_verified=True,
            feedback=[{"request_id": "q_1", "chunk_id": 3, "signal": "click"}],
            alerts=[{"fingerprint": "fp1", "starts_at": "2026-12-05T10:00:00+00:00", "status": "firing"}],
        ),
    )


def invariants(history: History) -> list[tuple[str, str]]:
    return [(v.invariant, v.record) for v in check(history).violations]


def test_a_clean_history_passes_and_its_5xx_is_tied_to_the_fault() -> None:
    verdict = check(clean())
    assert verdict.ok, [str(v) for v in verdict.violations]
    assert verdict.blamed == {1: 1}  # the 503 at t=11 fell in kill_ops_api's window


def test_a_lost_document_is_named() -> None:
    history = clean()
    history.final.documents = [d for d in history.final.documents if d["version"] != "e3"]
    assert invariants(history) == [("document-lost", "landing/a.md@e3")]


def test_a_version_replaced_before_any_poll_is_not_lost_but_a_stuck_one_is_named() -> None:
    history = clean()
    history.final.documents = [d for d in history.final.documents if d["version"] != "e1"]
    assert invariants(history) == []  # e1 was overwritten by e3 at t=3: never seen is fine
    history.final.documents.append({"id": 9, "key": "landing/a.md", "version": "e1", "status": "pending"})
    assert invariants(history) == [("document-unfinished", "landing/a.md@e1")]


def test_a_corrupt_file_ingested_and_a_quarantine_without_reason_are_named() -> None:
    history = clean()
    history.final.documents[1] = {**history.final.documents[1], "status": "ok"}
    assert invariants(history) == [("corrupt-ingested", "landing/bad.pdf@e2")]
    history.final.documents[1] = {**history.final.documents[1], "status": "quarantined", "reason": " "}
    assert invariants(history) == [("quarantine-no-reason", "landing/bad.pdf@e2")]


def test_a_double_promotion_is_named() -> None:
    history = clean()
    history.final.production_changes += [
        {"id": 3, "old_target": 2, "new_target": 1, "approval_id": None, "actor": "rollback"},
        {"id": 4, "old_target": 1, "new_target": 2, "approval_id": "ar_2", "actor": "U2"},
    ]
    verdict = check(history)
    assert [(v.invariant, v.record) for v in verdict.violations] == [("double-promotion", "request ar_2 -> v2")]
    assert "alias changes [2, 4]" in verdict.violations[0].detail


def test_a_promotion_without_a_counted_approval_is_named() -> None:
    history = clean()
    history.final.votes = []
    history.final.deliveries[0]["outcome"] = "already_decided"  # so the click itself is not the finding
    violations = check(history).violations
    assert [(v.invariant, v.record) for v in violations] == [
        ("promotion-unapproved", "production -> v2 (alias change 2)")
    ]
    assert "counted 0 of 1 approvals" in violations[0].detail
    history = clean()
    history.final.requests[1]["live_digest"] = "c" * 64  # the model that went live is not the one approved
    assert invariants(history) == [("promotion-unapproved", "production -> v2 (alias change 2)")]


def test_an_unacknowledged_decision_counted_twice_is_named() -> None:
    """The client got no answer (the ops API died after the write), retried, and both attempts were counted."""
    history = clean()
    history.calls.append(
        Call(
            t=11.5,
            what="decision",
            status=None,
            latency_ms=5000.0,
            channel="api",
            record={"request_id": "ar_2", "actor": "U4"},
        )
    )
    history.calls.append(
        Call(
            t=14.0,
            what="decision",
            status=200,
            latency_ms=20.0,
            channel="api",
            outcome="recorded",
            record={"request_id": "ar_2", "actor": "U4"},
        )
    )
    history.final.votes += [{"request_id": "ar_2", "actor": "U4", "vote": "approve", "channel": "api"}] * 2
    verdict = check(history)
    assert [(v.invariant, v.record) for v in verdict.violations] == [("counted-twice", "request ar_2 / U4")]
    assert verdict.violations[0].detail == "2 votes counted"


def test_an_acknowledged_click_not_counted_is_named() -> None:
    history = clean()
    history.final.votes = []
    history.final.production_changes = history.final.production_changes[:1]
    history.final.production = history.final.serving_version = history.final.audit_production = 1
    assert invariants(history) == [("click-not-counted", "request ar_2 / U2 via slack")]
    history.final.deliveries = []
    assert invariants(history) == [("ack-lost", "request ar_2 / U2 (Slack click k1)")]


def test_acknowledged_feedback_and_alerts_stored_never_or_twice_are_named() -> None:
    history = clean()
    history.final.feedback = []
    history.final.alerts *= 2
    assert invariants(history) == [
        ("ack-lost", "feedback click on q_1 chunk 3"),
        ("recorded-twice", "alert fp1 starting 2026-12-05T10:00:00+00:00"),
    ]


def test_a_stuck_run_is_named() -> None:
    history = clean()
    history.final.unfinished_runs = [{"run_id": "4f2a9c", "job": "demo__ingest_job", "status": "STARTED"}]
    violations = check(history).violations
    assert [(v.invariant, v.record) for v in violations] == [("run-stuck", "run 4f2a9c")]
    assert "demo__ingest_job is still STARTED" in violations[0].detail


def test_production_serving_and_audit_disagreeing_or_a_broken_audit_are_named() -> None:
    history = clean()
    history.final.serving_version = 1
    history.final.audit_verified = False
    history.final.audit_detail = "chain ar_2: record 3 missing"
    violations = check(history).violations
    assert [(v.invariant, v.record) for v in violations] == [
        ("serving-disagrees", "production"),
        ("audit-broken", "audit log"),
    ]
    assert violations[0].detail == "production v2, serving index v1, audit log v2"


def test_errors_outside_fault_windows_are_named_and_inside_them_blamed() -> None:
    history = clean()
    history.calls.append(Call(t=40.0, what="search", status=500, latency_ms=3.0))
    history.calls.append(Call(t=27.9, what="answer", status=None, latency_ms=5000.0))  # 13 + 15 s of grace
    history.calls.append(Call(t=28.1, what="answer", status=None, latency_ms=5000.0))
    verdict = check(history)
    assert [(v.invariant, v.record) for v in verdict.violations] == [
        ("unexplained-error", "search at t=40.0s"),
        ("unexplained-error", "answer at t=28.1s"),
    ]
    assert verdict.blamed == {1: 1, 7: 1}


def test_a_history_round_trips_through_its_file(tmp_path: Path) -> None:
    history = clean()
    history.save(tmp_path / "history.json")
    again = History.load(tmp_path / "history.json")
    assert again == history
    assert check(again).blamed == check(history).blamed


@pytest.mark.parametrize("status", ["pending", "parsed"])
def test_every_non_terminal_ledger_status_is_unfinished(status: str) -> None:
    history = clean()
    history.final.documents[2] = {**history.final.documents[2], "status": status}
    assert invariants(history) == [("document-unfinished", "landing/a.md@e3")]


def test_a_version_recorded_twice_is_named() -> None:
    history = clean()
    history.final.documents.append(copy.deepcopy(history.final.documents[2]) | {"id": 7})
    assert invariants(history) == [("document-twice", "landing/a.md@e3")]


def test_an_error_whose_request_was_in_flight_when_a_fault_began_is_blamed_on_it() -> None:
    """Found by the 30-minute soak: a feedback call sent 5 ms before a PostgreSQL reset, answered 503 during it."""
    history = clean()
    history.calls.append(Call(t=9.995, what="feedback", status=503, latency_ms=11.8))
    history.calls.append(Call(t=9.0, what="feedback", status=503, latency_ms=900.0))  # answered before it began
    verdict = check(history)
    assert [(v.invariant, v.record) for v in verdict.violations] == [("unexplained-error", "feedback at t=9.0s")]
    assert verdict.blamed == {1: 1, 6: 1}
