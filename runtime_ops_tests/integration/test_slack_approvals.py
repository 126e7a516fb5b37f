"""Approvals through Slack, end to end: the real slack_sdk client against a local Slack Web API server, signed
callbacks into the ops API on a real uvicorn server, a real PostgreSQL state store."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

import httpx
import pytest

from runtime_ops.approvals.announce import announcer_for
from runtime_ops.approvals.requests import request_policy
from runtime_ops.components.loading import get_spec
from runtime_ops.definitions import build_resources
from runtime_ops.policies.approvals import Tier
from runtime_ops.resources.approvals import ApprovalsResource
from runtime_ops.settings import Settings, get_settings, load_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import QUESTION_SET, QUESTIONS, ApiServer, FakeClock, open_pending
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.slack_signing import interaction_body, sign

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0APPROVALS"


@dataclass
class World:
    settings: Settings
    store: StateStore
    slack: SlackServer
    api: ApiServer
    clock: FakeClock
    request: dict[str, Any]
    ts: str
    clicks: int = 0

    def tick(self) -> dict[str, list[str]]:
        announcer = announcer_for(
            cast(ApprovalsResource, build_resources(self.settings)["approvals"]),
            self.store,
            get_spec(settings=self.settings).approvals.slack_channel,
        )
        return announcer.tick(self.clock.now())

    def body(
        self, user: str, action: str = "approve", *, request_id: str | None = None, action_ts: str | None = None
    ) -> bytes:
        self.clicks += 1
        return interaction_body(
            request_id or self.request["id"],
            action,
            user,
            message_ts=self.ts,
            action_ts=action_ts or f"1700000000.{self.clicks:06d}",
            channel_id=CHANNEL,
            response_url=self.slack.response_url(f"click{self.clicks}"),
        )

    def post(self, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
        if headers is None:
            headers = sign(SECRET, body, int(self.clock.now().timestamp()))
        headers = {"content-type": "application/x-www-form-urlencoded", **headers}
        return web.post(f"{self.api.url}/slack/interactions", content=body, headers=headers, timeout=10)

    def click(self, user: str, action: str = "approve", **kw: Any) -> httpx.Response:
        return self.post(self.body(user, action, **kw))

    def status(self) -> str:
        return self.store.requests.get_request(self.request["id"])["status"]

    def audit(self, event: str = "attempt") -> list[dict[str, Any]]:
        return [r for r in self.store.audit_log.records() if r["event"] == event]


def _blocks_text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks)


@pytest.fixture
def world(env, postgres_url, request) -> Iterator[World]:  # type: ignore[no-untyped-def]
    opts = getattr(request, "param", {})
    with SlackServer() as slack:
        port = free_port()
        env(
            database_url=postgres_url,
            SLACK_BOT_TOKEN="xoxb-test-token",
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_APPROVAL_CHANNEL=CHANNEL,
            SLACK_API_URL=slack.base_url,
            SLACK_HOOKS_URL=slack.url,  # the local server's response_url endpoints
            RUNTIME_OPS_APPROVERS=opts.get("approvers", "U2,U3,U4"),
            RUNTIME_OPS_ESCALATION_APPROVERS="U9",
            RUNTIME_OPS_REQUIRED_APPROVALS=str(opts.get("required", 1)),
            RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{port}",
            RUNTIME_OPS_ESCALATE_AFTER=opts.get("escalate_after", "1h"),
            RUNTIME_OPS_EXPIRE_AFTER=opts.get("expire_after", "2h"),
        )
        settings = load_settings()
        store = open_store(settings.resolved_database_url, get_settings())
        clock = FakeClock()
        policy = request_policy(get_spec(settings=settings))
        if "tiers" in opts:  # an escalation chain: (comma-separated approvers, hours after opening) per tier
            tiers = tuple(Tier(tuple(a.split(",")), timedelta(hours=h)) for a, h in opts["tiers"])
            policy = dataclasses.replace(policy, escalation_approvers=(), escalate_after=None, tiers=tiers)
        pending = open_pending(
            store, policy, now=clock.now(), requested_by=opts.get("requested_by", "runtime_ops"), production_model=True
        )
        api = ApiServer(settings, clock)
        api.port, api.url = port, f"http://127.0.0.1:{port}"
        with api:
            w = World(settings, store, slack, api, clock, pending, ts="")
            summary = w.tick()
            assert summary["announced"] == [pending["id"]]
            [post] = slack.calls_to("chat.postMessage")
            w.ts = post.response_json["ts"]
            yield w


def test_request_is_posted_with_buttons_and_personal_links(world: World) -> None:
    message = world.slack.messages[world.ts]
    text = _blocks_text(message["blocks"])
    assert '"action_id": "approve"' in text and '"action_id": "reject"' in text
    assert "ndcg@5" in text and world.request["candidate_digest"][:12] in text
    dagster = world.settings.dagster_url
    assert f"<{dagster}/runs/run-1|Dagster run>" in text  # the run that opened the request
    assert f"<{dagster}/assets/demo/embedding_model|Candidate model>" in text
    assert f"<{dagster}/assets/demo/evaluation_report|Evaluation report>" in text
    production = world.store.evaluations.get_eval_report(world.request["eval_report_id"])["production_version"]
    on = f"set `{QUESTION_SET[:12]}`, {QUESTIONS} questions"
    assert f"vs production v{production} (re-scored on {on})" in text
    assert f"Both columns scored on evaluation {on}" in text
    links = {e["user"]: e["text"] for e in world.slack.ephemerals}
    assert set(links) == {"U2", "U3", "U4"}
    assert all(f"{world.api.url}/approvals/" in t for t in links.values())
    assert world.tick()["announced"] == []  # announced once
    notified = world.audit("notified")
    assert len(notified) == 1 and "xoxb" not in json.dumps(notified[0]["detail"])


def test_approve_updates_the_message_and_removes_the_buttons(world: World) -> None:
    assert world.click("U2").status_code == 200
    assert world.status() == "approved"
    world.slack.wait_for_calls("chat.update", 1)
    text = _blocks_text(world.slack.messages[world.ts]["blocks"])
    assert '"action_id"' not in text and "U2" in text and "Approved" in text
    # what follows, when (the approvals sensor's interval: 1 s in tests) and where to watch it
    runs = f"{world.settings.dagster_url}/runs?q%5B%5D=tag%3Aruntime_ops%2Fapproval_id%3D{world.request['id']}"
    assert "The approvals sensor launches the promotion run within ~1 s" in text
    assert f"<{runs}|Run in Dagster>" in text
    assert [r["outcome"] for r in world.audit()] == ["accepted"]
    assert [r["outcome"] for r in world.audit("decided")] == ["approved"]


def test_reject_by_one_approver_rejects(world: World) -> None:
    assert world.click("U3", "reject").status_code == 200
    assert world.status() == "rejected"
    world.slack.wait_for_calls("chat.update", 1)
    text = _blocks_text(world.slack.messages[world.ts]["blocks"])
    assert "Rejected" in text
    production = world.store.evaluations.get_eval_report(world.request["eval_report_id"])["production_version"]
    assert f"Production stays on v{production} and no promotion run starts" in text
    assert "The approvals sensor removes the canary alias within ~1 s." in text
    assert "runs?q" not in text  # no promotion to watch


@pytest.mark.parametrize("where", ["another host", "loopback by another name"])
def test_a_signed_click_cannot_aim_the_server_at_another_host(world: World, where: str) -> None:
    with SlackServer() as other:
        target = other.response_url("stolen")
        if where != "another host":  # the hooks server itself, named so that it is not the allowed origin
            target = world.slack.response_url("stolen").replace("127.0.0.1", "localhost")
        body = interaction_body(
            world.request["id"], "approve", "U2", message_ts=world.ts, action_ts="1700000000.999999",
            channel_id=CHANNEL, response_url=target,
        )  # fmt: skip
        reply = world.post(body)
        assert reply.status_code == 400, reply.text
        assert "response_url is not on Slack's hooks origin" in reply.json()["error"]
        assert world.status() == "pending" and world.store.votes.for_request(world.request["id"]) == []
        # A click that is answered afterwards shows the refused one scheduled nothing.
        assert world.click("U7").status_code == 200
        world.slack.wait_for(lambda s: bool(s.responses.get(f"click{world.clicks}")))
        assert other.calls == [] and "stolen" not in world.slack.responses
    assert [r["outcome"] for r in world.audit()] == ["malformed", "unauthorised"]


def _responses(world: World) -> list[dict[str, Any]]:
    return [r for rs in world.slack.responses.values() for r in rs]


def test_unauthorised_click_gets_an_ephemeral_explanation_and_changes_nothing(world: World) -> None:
    assert world.click("U7").status_code == 200
    world.slack.wait_for(lambda s: bool(s.responses.get(f"click{world.clicks}")))
    [reply] = world.slack.responses[f"click{world.clicks}"]
    assert reply["response_type"] == "ephemeral" and reply["replace_original"] is False
    assert "U7 is not an approver" in reply["text"]
    assert world.status() == "pending" and world.store.votes.for_request(world.request["id"]) == []
    assert [r["outcome"] for r in world.audit()] == ["unauthorised"]


@pytest.mark.parametrize("world", [{"requested_by": "U2"}], indirect=True)
def test_requester_may_not_approve_their_own_candidate(world: World) -> None:
    assert world.click("U2").status_code == 200
    assert world.status() == "pending"
    assert [r["outcome"] for r in world.audit()] == ["self_approval"]
    world.slack.wait_for(lambda s: any("four eyes" in r["text"] for r in _responses(world)))
    assert world.click("U3").status_code == 200 and world.status() == "approved"


@pytest.mark.parametrize("world", [{"required": 2}], indirect=True)
def test_two_of_three(world: World) -> None:
    world.click("U2")
    assert world.status() == "pending"
    world.slack.wait_for_calls("chat.update", 1)
    assert "1 of 2" in _blocks_text(world.slack.messages[world.ts]["blocks"])
    world.click("U2")  # the same person twice is one approval
    assert world.status() == "pending"
    world.click("U4")
    assert world.status() == "approved"
    assert sorted(v["actor"] for v in world.store.votes.for_request(world.request["id"])) == ["U2", "U4"]
    assert [r["outcome"] for r in world.audit()] == ["recorded", "duplicate_vote", "accepted"]
    world.slack.wait_for(lambda s: '"action_id"' not in _blocks_text(s.messages[world.ts]["blocks"]))


def test_repeated_delivery_is_the_same_attempt(world: World) -> None:
    body = world.body("U2")
    first = world.post(body)
    second = world.post(body)  # Slack retried the same click
    assert first.status_code == second.status_code == 200
    assert world.status() == "approved"
    assert [r["outcome"] for r in world.audit()] == ["accepted"]
    assert len(world.store.votes.for_request(world.request["id"])) == 1


def test_forged_missing_stale_and_garbled_requests_are_refused(world: World) -> None:
    body = world.body("U2")
    now = int(world.clock.now().timestamp())
    forged = sign("not-the-secret", body, now)
    cases = {
        "forged": forged,
        "missing": {},
        "stale": sign(SECRET, body, now - 6 * 60),
        "non-numeric": {**sign(SECRET, body, now), "X-Slack-Request-Timestamp": "yesterday"},
        "tampered body": sign(SECRET, body + b"x", now),
    }
    for name, headers in cases.items():
        reply = world.post(body, headers)
        assert reply.status_code == 401, name
    malformed = b"payload=%7Bnot-json"
    reply = world.post(malformed, sign(SECRET, malformed, now))
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]
    assert world.status() == "pending" and world.store.votes.for_request(world.request["id"]) == []
    # The first forgery of the window is recorded with its detail; the other four are summed up when the window
    # closes (here: the next forgery, a minute later), with their reasons and client.
    assert [r["outcome"] for r in world.audit()] == ["forged", "malformed"]
    assert world.audit("refusals") == []
    world.clock.advance(seconds=61)
    assert world.post(body, sign("not-the-secret", body, int(world.clock.now().timestamp()))).status_code == 401
    assert [r["outcome"] for r in world.audit()] == ["forged", "malformed", "forged"]
    [summary] = world.audit("refusals")
    assert (summary["channel"], summary["outcome"], summary["detail"]["count"]) == ("slack", "forged", 4)
    assert summary["detail"]["clients"] == [["127.0.0.1", 4]] and summary["detail"]["limited"] == 0
    reasons = " ".join(reason for reason, _ in summary["detail"]["reasons"])
    assert "non-numeric" in reasons and "older than 5 minutes" in reasons
    assert world.store.audit_log.verify().ok
    assert not world.slack.calls_to("chat.update")


def test_json_api_lists_requests(world: World) -> None:
    world.click("U2")
    read = world.api.key_headers("read")
    assert web.get(f"{world.api.url}/api/approvals").status_code == 401  # no key, no list
    rows = web.get(f"{world.api.url}/api/approvals", params={"status": "approved"}, headers=read).json()
    assert [r["id"] for r in rows] == [world.request["id"]]
    assert rows[0]["decided_by"] == "U2" and rows[0]["approvers"] == ["U2", "U3", "U4"]
    assert web.get(f"{world.api.url}/api/approvals", params={"status": "pending"}, headers=read).json() == []
    assert web.get(f"{world.api.url}/api/approvals", params={"status": "bogus"}, headers=read).status_code == 400
    assert web.get(f"{world.api.url}/readyz").json()["status"] == "ready"
