"""What a rollback request and a ramp's stages say (pure): `approvals/rollback_facts.py`,
`online/stage_results.py`, and the message state that makes a Slack message resync once per change."""

from __future__ import annotations

from datetime import UTC, datetime

from runtime_ops.approvals.rollback_facts import HelpfulShare, RollbackFacts, rollback_facts
from runtime_ops.approvals.view_text import view_state
from runtime_ops.online.evidence import ArmRequests, OnlineInputs, online_evidence
from runtime_ops.online.stage_results import StageResult, ramp_outcome

FIRED = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)


def _facts(**over: object) -> RollbackFacts:
    values: dict[str, object] = {"pipeline": "tickets", "alertname": "RetrievalQualityRegressed", "fired_at": FIRED,
                                 "from_version": 4, "to_version": 2, "rule": "quality", "alert_id": 7}  # fmt: skip
    return RollbackFacts(**{**values, **over})  # type: ignore[arg-type]


def test_a_rollback_names_its_versions_alert_and_both_outcomes() -> None:
    facts = _facts(now=HelpfulShare(6, 10), before=HelpfulShare(80, 100))
    assert facts.title() == "Roll back tickets from v4 to v2?"
    assert facts.label() == "rollback v4 -> v2"
    lines = dict(facts.lines())
    assert lines["Alert"] == "alert #7 RetrievalQualityRegressed fired at 2026-11-29 11:00:00 UTC (rule quality)"
    assert lines["Live evidence"] == (
        "helpful share now (last 30 min) 60% helpful (6 of 10 judgements), before (the day before) 80% helpful "
        "(80 of 100 judgements): -20 points"
    )
    assert "production moves back from v4 to v2" in lines["On approve"]
    assert "v4 candidate is marked rolled back" in lines["On approve"]
    assert lines["On reject"] == "production stays on v4; the alert stays open and no rollback run starts"
    assert facts.next_step("pending") == ""
    assert facts.next_step("rejected").startswith("Not rolled back: production stays on v4")


def test_no_feedback_says_no_live_evidence() -> None:
    assert _facts().live_line().startswith("no live evidence")
    assert _facts(now=HelpfulShare(0, 0), before=HelpfulShare(0, 0)).live_line().startswith("no live evidence")
    only_now = _facts(now=HelpfulShare(1, 4), before=HelpfulShare(0, 0)).live_line()
    assert "25% helpful (1 of 4" in only_now and "before (the day before) no judgements" in only_now


def test_facts_round_trip_through_the_request_row_and_only_there() -> None:
    facts = _facts(now=HelpfulShare(1, 2), before=None, measured_at=FIRED)
    assert rollback_facts({"evidence": {"rollback": facts.to_json()}}) == facts
    assert rollback_facts({"evidence": None}) is None
    assert rollback_facts({"target": "a/b", "evidence": {"rollback": facts.to_json()}}) is None  # an asset gate's
    assert rollback_facts({"evidence": {"rollback": {"fired_at": "garbled"}}}) is None


def _stage(stage: int, status: str, **extra: object) -> dict[str, object]:
    return {"stage": stage, "share": 0.5, "status": status, "started_at": FIRED, "ended_at": None, **extra}


def test_the_ramp_outcome_is_its_last_stage() -> None:
    assert ramp_outcome([]) == "-"
    assert ramp_outcome([_stage(0, "active")]) == "ramping"
    assert ramp_outcome([_stage(0, "completed"), _stage(1, "completed")]) == "passed"
    assert ramp_outcome([_stage(0, "completed"), _stage(1, "rolled_back")]) == "rolled back"
    assert ramp_outcome([_stage(0, "stopped")]) == "halted"


def test_a_stage_result_carries_its_counts_interval_and_verdict() -> None:
    inputs = OnlineInputs(
        rollout_id=3,
        candidate=ArmRequests((None,) * 30 + (1,) * 2),
        production=ArmRequests((1,) * 20 + (None,) * 12),
    )
    evidence = online_evidence(inputs, mode="canary", min_queries=25)
    result = StageResult.of(_stage(0, "rolled_back", reason="the candidate loses online"), evidence)
    as_json = result.to_dict()
    assert (as_json["stage"], as_json["outcome"], as_json["queries"], as_json["verdict"]) == (
        1,
        "rolled back",
        32,
        "worse",
    )
    assert as_json["feedback_rate"]["candidate"] == [2, 32] and as_json["feedback_rate"]["high"] < 0
    line = result.line()
    assert line.startswith("stage 1 (50% of sessions) rolled back: 32 candidate requests, positive-feedback rate 0.062")
    assert line.endswith("worse (min 25); the candidate loses online")
    assert StageResult.of(_stage(1, "active"), None).line() == "stage 2 (50% of sessions) ramping: evidence unavailable"


def test_the_message_state_changes_with_the_verdict_and_stage_and_fits_its_column() -> None:
    request = {"status": "pending", "escalated_at": None}
    waiting = view_state(request, 0, None, "not enough queries")
    assert waiting == "pending|0|0|e"
    assert view_state(request, 0, None, "worse") != waiting  # a new verdict resyncs the message
    assert view_state(request, 0, None, "not enough queries") == waiting  # the same one does not
    ramping = view_state({"status": "approved", "escalated_at": FIRED}, 12, [_stage(3, "active")], "better")
    assert len(ramping) <= 16 and ramping != view_state({"status": "approved"}, 12, [_stage(3, "completed")], "better")
