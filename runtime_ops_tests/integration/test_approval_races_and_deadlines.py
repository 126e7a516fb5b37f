"""Exactly-once under 50 concurrent clicks; escalation and fail-closed expiry with an injected clock, across
restarts of the ops API and the approvals sensor; the audit chain proves tampering."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import text

from runtime_ops import clock
from runtime_ops.cli import main as cli
from runtime_ops_tests.integration.test_slack_approvals import World, world  # noqa: F401 - the fixture
from runtime_ops_tests.support.flow import Flow

FIFTY = ",".join(f"U{i:02d}" for i in range(1, 51))


@pytest.fixture
def flow(world: World, dagster_instance, monkeypatch):  # type: ignore[no-untyped-def]  # noqa: F811
    monkeypatch.setattr(clock, "now", world.clock.now)
    return lambda: Flow(dagster_instance)


@pytest.mark.parametrize("world", [{"approvers": FIFTY}], indirect=True)
@pytest.mark.parametrize("mix", ["approve", "approve-and-reject"])
def test_fifty_concurrent_clicks_one_outcome(world: World, flow, mix: str) -> None:  # noqa: F811
    users = [f"U{i:02d}" for i in range(1, 51)]
    bodies = [world.body(u, "reject" if mix != "approve" and i % 2 else "approve") for i, u in enumerate(users)]
    with ThreadPoolExecutor(max_workers=50) as pool:
        replies = list(pool.map(world.post, bodies))
    assert [r.status_code for r in replies] == [200] * 50
    request = world.store.requests.get_request(world.request["id"])
    attempts = world.audit()
    assert len(attempts) == 50
    assert [r["outcome"] for r in attempts].count("accepted") == 1
    assert {r["outcome"] for r in attempts} == {"accepted", "already_decided"}
    [decided] = world.audit("decided")
    assert decided["outcome"] == request["status"] and len(world.store.votes.for_request(request["id"])) == 1
    winner = next(r for r in attempts if r["outcome"] == "accepted")
    assert request["decided_by"] == winner["actor"]
    assert world.store.audit_log.verify().ok

    f = flow()
    launched = f.tick("approvals_sensor") + f.tick("approvals_sensor")
    if request["status"] == "approved":
        assert [r.run_key for r in launched] == [request["id"]]
    else:
        assert launched == []
    if mix == "approve":
        assert request["status"] == "approved"


def test_escalation_and_expiry_survive_restarts(world: World, flow) -> None:  # noqa: F811
    rid = world.request["id"]
    f = flow()
    assert f.tick("approvals_sensor") == []
    world.clock.advance(minutes=61)
    world.click("U9")  # past the escalation deadline, but not yet escalated: U9 is not an approver yet
    assert world.status() == "pending"

    f.tick("approvals_sensor")
    [mention] = world.slack.thread_replies(world.ts)
    assert "<@U9>" in mention["text"]
    assert any(e["user"] == "U9" and "/approvals/" in e["text"] for e in world.slack.ephemerals)
    world.api.restart()
    f = flow()  # a new daemon process: fresh definitions and cursor
    f.tick("approvals_sensor")
    assert len(world.slack.thread_replies(world.ts)) == 1  # escalated once
    assert [r["event"] for r in world.store.audit_log.records(rid)].count("escalated") == 1
    assert [r["outcome"] for r in world.audit()] == ["unauthorised"]
    assert world.click("U9").status_code == 200  # once escalated, the escalation approver may decide
    assert world.status() == "approved" and world.store.requests.get_request(rid)["decided_by"] == "U9"


@pytest.mark.parametrize(
    "world",
    [{"approvers": "U2", "tiers": [("T1", 1), ("T2", 2), ("T3,T4", 3)], "expire_after": "4h"}],
    indirect=True,
)
def test_a_three_tier_escalation_reaches_each_tier_on_its_deadline_once_across_restarts(world: World, flow) -> None:  # noqa: F811
    rid = world.request["id"]
    opened = world.request["created_at"]
    f = flow()
    for tier, users in enumerate((["T1"], ["T2"], ["T3", "T4"]), start=1):
        world.clock.current = opened + timedelta(hours=tier, minutes=-1)
        f.tick("approvals_sensor")
        assert len(world.audit("escalated")) == tier - 1, f"tier {tier} joined before its deadline"
        assert world.click(users[0]).status_code == 200 and world.status() == "pending"  # not an approver yet
        world.clock.current = opened + timedelta(hours=tier, minutes=1)
        f.tick("approvals_sensor")
        world.api.restart()
        f = flow()  # a new daemon: fresh definitions, no cursor
        f.tick("approvals_sensor")
        escalations = world.audit("escalated")
        assert [r["detail"]["tier"] for r in escalations] == list(range(1, tier + 1)), "each tier once, in order"
        assert escalations[-1]["detail"]["escalation_approvers"] == users
        replies = world.slack.thread_replies(world.ts)
        assert len(replies) == tier and all(f"<@{u}>" in replies[-1]["text"] for u in users)
    refused = [r for r in world.audit() if r["outcome"] == "unauthorised"]
    assert [r["actor"] for r in refused] == ["T1", "T2", "T3"], "each was refused before its tier joined"
    # After the last tier, the request fails closed at its expiry, once.
    world.clock.current = opened + timedelta(hours=4, minutes=1)
    f.tick("approvals_sensor")
    f.tick("approvals_sensor")
    assert world.status() == "expired" and len(world.audit("expired")) == 1
    assert world.click("T4").status_code == 200 and world.status() == "expired"
    assert world.store.audit_log.verify().ok
    assert rid == world.request["id"]


@pytest.mark.parametrize("world", [{"approvers": "U2,U3", "escalate_after": "1h", "expire_after": "2h"}], indirect=True)
def test_expiry_fails_closed_and_compensates_once(world: World, flow) -> None:  # noqa: F811
    rid = world.request["id"]
    store = world.store
    assert store.registry.alias("canary") == world.request["candidate_version"]
    f = flow()
    f.tick("approvals_sensor")
    world.clock.advance(hours=2, minutes=1)
    world.api.restart()
    f = flow()
    f.tick("approvals_sensor")
    request = store.requests.get_request(rid)
    assert request["status"] == "expired" and "fail closed" in request["decision_reason"]
    assert store.registry.alias("canary") is None  # the compensation removed the canary alias
    world.slack.wait_for(lambda s: "Expired" in json.dumps(s.messages[world.ts]["blocks"]))
    blocks = json.dumps(world.slack.messages[world.ts]["blocks"])
    assert '"action_id"' not in blocks
    # the message says what the expiry did: the same tick removed the canary before updating it
    assert "Production stays on v" in blocks and "The canary alias was removed." in blocks
    for _ in range(2):
        world.api.restart()
        flow().tick("approvals_sensor")
    events = [r["event"] for r in store.audit_log.records(rid)]
    assert events.count("expired") == 1 and events.count("compensated") == 1
    reply = world.click("U2")
    assert reply.status_code == 200 and store.requests.get_request(rid)["status"] == "expired"
    assert world.audit()[-1]["outcome"] == "already_decided"
    assert flow().tick("approvals_sensor") == []  # nothing to promote


@pytest.mark.parametrize("world", [{"approvers": "U2,U3"}], indirect=True)
def test_a_click_after_the_deadline_expires_the_request(world: World, flow) -> None:  # noqa: F811
    world.clock.advance(hours=3)
    world.click("U2")
    request = world.store.requests.get_request(world.request["id"])
    assert request["status"] == "expired" and world.store.votes.for_request(request["id"]) == []
    assert world.audit()[-1]["outcome"] == "expired"
    flow().tick("approvals_sensor")  # the sensor runs the compensation for it, once
    flow().tick("approvals_sensor")
    assert [r["event"] for r in world.store.audit_log.records(request["id"])].count("compensated") == 1
    assert world.store.registry.alias("canary") is None


def test_tampering_with_one_audit_record_is_named(world: World, capsys) -> None:  # noqa: F811
    world.click("U7")
    world.click("U2")
    assert cli(["audit", "anchor"]) == 0  # as the approvals sensor does on every tick: verify needs the anchors
    assert cli(["audit", "verify"]) == 0
    assert "intact" in capsys.readouterr().out
    records = world.store.audit_log.records()
    victim = records[len(records) // 2]["id"]
    with world.store.tx() as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE id = :id"), {"id": victim})
    assert cli(["audit", "verify"]) == 1
    err = capsys.readouterr().err
    assert f"record {victim}" in err and "modified" in err
    assert cli(["audit", "show", world.request["id"]]) == 0
    shown = capsys.readouterr().out
    assert "request_opened" in shown and "accepted" in shown and "unauthorised" in shown
