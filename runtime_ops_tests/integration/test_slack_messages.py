"""The Slack side of approvals against a local Slack Web API, driven through the real slack_sdk WebClient."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlencode
from urllib.request import Request, urlopen

import pytest
from slack_sdk.signature import SignatureVerifier

from runtime_ops.approvals.announce import Announcer, next_step
from runtime_ops.approvals.slack.blocks import RequestView, request_blocks, request_text
from runtime_ops.approvals.slack.client import SlackError, SlackNotifier, slack_client
from runtime_ops.approvals.slack.interactions import Interaction, MalformedInteraction, parse_interaction
from runtime_ops.policies.gate_text import interval_text
from runtime_ops_tests.support.approvals_support import gate_evidence
from runtime_ops_tests.support.slack_server import SlackServer, block_limit_violations
from runtime_ops_tests.support.slack_signing import encode_payload, interaction_body, interaction_payload, sign

TOKEN = "xoxb-1234-5678-runtimeopstesttoken"
EVIDENCE = gate_evidence()
CHANNEL = "C0APPROVALS"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PROMOTION_RUNS = "http://dagster.local/runs?q%5B%5D=tag%3Aruntime_ops%2Fapproval_id%3Dapr-0001"
APPROVED_NEXT = (
    "The approvals sensor launches the promotion run within ~10 s; production moves to v7 when that run succeeds."
)


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def notifier(slack: SlackServer) -> SlackNotifier:
    return SlackNotifier(slack_client(TOKEN, api_url=slack.base_url), CHANNEL, hooks_url=slack.url)


def view(**overrides: Any) -> RequestView:
    fields: dict[str, Any] = {
        "request_id": "apr-0001",
        "candidate_version": 7,
        "production_version": 6,
        "candidate_digest": "d1g35t0123456789abcdef",
        "status": "pending",
        "required_approvals": 2,
        "approvals": [],
        "decided_by": [],
        "decision_reason": None,
        "metrics": [("recall@5", 0.82, 0.79), ("mrr", 0.61, 0.60), ("ndcg@10", 0.70, None)],
        "verdict": EVIDENCE["reason"],
        "interval": interval_text(EVIDENCE["interval"]),
        "changed": EVIDENCE["changed_questions"],
        "dagster_run_url": "http://dagster.local/runs/abc-123",
        "candidate_url": "http://dagster.local/assets/demo/embedding_model",
        "report_url": "http://dagster.local/assets/demo/evaluation_report",
        "promotion_runs_url": PROMOTION_RUNS,
        "page_url": "http://ops.local/approvals/tok123",
        "expires_at": datetime(2030, 1, 2, 3, 4, tzinfo=UTC),
        "escalated": False,
        "superseded_by": None,
        "question_set": "abc123def456",
        "questions": 45,
    }
    fields.update(overrides)
    return RequestView(**fields)


def all_text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def actions_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if b["type"] == "actions"]


def outcome(blocks: list[dict[str, Any]]) -> str:
    return next(b["text"]["text"] for b in blocks if b.get("block_id") == "outcome")


# ---------------------------------------------------------------------------------------------- client


def test_client_is_built_by_dagster_slack_and_aimed_at_the_server(slack: SlackServer, monkeypatch) -> None:
    import dagster_slack

    built: list[str] = []
    original = dagster_slack.SlackResource.get_client

    def spy(self):
        built.append(self.token)
        return original(self)

    monkeypatch.setattr(dagster_slack.SlackResource, "get_client", spy)
    client = slack_client(TOKEN, api_url=slack.base_url.rstrip("/"))
    assert built == [TOKEN]
    assert client.base_url == slack.base_url and client.base_url.endswith("/api/")
    assert client.timeout == 10
    assert client.auth_test()["user_id"] == "U0BOTUSER"
    assert slack.calls[-1].method == "auth.test" and slack.calls[-1].token == TOKEN

    default = slack_client(TOKEN, api_url=None)
    assert default.base_url == "https://slack.com/api/"


# ---------------------------------------------------------------------------------------------- messages


def test_post_request_shows_buttons_while_pending(slack: SlackServer, notifier: SlackNotifier) -> None:
    channel, ts = notifier.post_request(view())
    assert channel == CHANNEL and ts == "1700000000.000100"

    message = slack.messages[ts]
    assert message["channel"] == CHANNEL
    assert message["text"] == request_text(view())
    assert "Promote model v7 to production?" in message["text"]
    blocks = message["blocks"]
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Promote model v7 to production?", "emoji": True},
    }
    [actions] = actions_blocks(blocks)
    assert actions["block_id"] == "approval:apr-0001"
    approve, reject = actions["elements"]
    assert (approve["action_id"], approve["style"], approve["value"]) == ("approve", "primary", "apr-0001")
    assert (reject["action_id"], reject["style"], reject["value"]) == ("reject", "danger", "apr-0001")
    assert approve["text"]["text"] == "Approve" and reject["text"]["text"] == "Reject"
    assert approve["confirm"]["confirm"]["text"] == "Approve" and reject["confirm"]["style"] == "danger"

    text = all_text(blocks)
    assert "*Verdict:* *better, but below the auto-approve margin +0.020*: ndcg@5 +0.010" in text
    assert "*Candidate minus production:* ndcg@5 +0.010 (95% CI +0.002 to +0.018, 45 questions)" in text
    # the changed questions, compact: better or worse, the question, the relevant document's rank under both
    assert "*Changed most* (relevant document's rank, production → candidate):" in text
    assert "• worse: “what does a lease protect” — guide/lease.md: 1 → not in top 10" in text
    assert "• better: “how do I rotate the signing keys” — guide/keys.md: 3 → 1" in text
    assert "recall@5" in text and "0.8200" in text and "0.7900" in text and "+0.0300" in text
    assert "ndcg@10" in text and "new" in text  # no production value: no delta
    assert "d1g35t012345" in text and "d1g35t0123456" not in text  # digest: first 12 chars
    assert "<http://dagster.local/runs/abc-123|Dagster run>" in text
    assert "<http://dagster.local/assets/demo/embedding_model|Candidate model>" in text
    assert "<http://dagster.local/assets/demo/evaluation_report|Evaluation report>" in text
    assert "<http://ops.local/approvals/tok123|Evidence page>" in text
    # every number names the set it was scored on; production's were re-scored on that set
    assert "Candidate *v7* vs production v6 (re-scored on set `abc123def456`, 45 questions)" in text
    assert "Both columns scored on evaluation set `abc123def456`, 45 questions\\n```metric" in text
    assert "next_step" not in text and PROMOTION_RUNS not in text  # nothing decided, nothing follows yet
    assert "2030-01-02 03:04 UTC" in text  # expiry (fallback of the Slack date token)
    assert outcome(blocks).startswith("⏳ Waiting for 0 of 2 approvals")
    assert block_limit_violations(blocks) == []
    assert slack.calls[-1].method == "chat.postMessage" and slack.calls[-1].ok


def test_partial_approvals_and_escalation_are_shown(notifier: SlackNotifier, slack: SlackServer) -> None:
    blocks = request_blocks(view(approvals=["U1"], escalated=True))
    assert "1 of 2 approvals: <@U1>" in outcome(blocks)
    assert "escalated" in outcome(blocks)
    assert len(actions_blocks(blocks)) == 1  # still pending: still clickable
    assert "1 of 2 approvals: <@U1>" in request_text(view(approvals=["U1"]))


def test_update_after_decision_removes_buttons_and_states_outcome(slack: SlackServer, notifier: SlackNotifier) -> None:
    channel, ts = notifier.post_request(view())
    notifier.update_request(channel, ts, view(approvals=["U1"]))
    assert "1 of 2 approvals: <@U1>" in outcome(slack.messages[ts]["blocks"])

    approved = view(status="approved", approvals=["U1", "U2"], decided_by=["U1", "U2"], next_step=APPROVED_NEXT)
    notifier.update_request(channel, ts, approved)
    message = slack.messages[ts]
    assert message["edits"] == 2
    assert actions_blocks(message["blocks"]) == []
    assert outcome(message["blocks"]) == "✅ Approved by <@U1>, <@U2> (2 of 2)"
    [next_step] = [b["text"]["text"] for b in message["blocks"] if b.get("block_id") == "next_step"]
    assert next_step == f"*Next:* {APPROVED_NEXT} <{PROMOTION_RUNS}|Run in Dagster>"
    assert "Approved by <@U1>, <@U2> (2 of 2)" in message["text"]
    assert "Evidence page" not in all_text(message["blocks"])  # the decision link is spent
    assert [c.method for c in slack.calls] == ["chat.postMessage", "chat.update", "chat.update"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"status": "rejected", "decided_by": ["U3"], "decision_reason": "recall drop on legal docs"},
            "❌ Rejected by <@U3>: recall drop on legal docs",
        ),
        ({"status": "rejected", "decided_by": ["U3"]}, "❌ Rejected by <@U3>"),
        ({"status": "expired"}, "⌛ Expired without a decision at "),
        (
            {"status": "superseded", "superseded_by": "apr-0002"},
            "↪ Superseded by apr-0002 (the candidate was re-trained; this decision no longer applies)",
        ),
    ],
)
def test_closed_requests_have_no_buttons(
    slack: SlackServer, notifier: SlackNotifier, overrides: dict[str, Any], expected: str
) -> None:
    channel, ts = notifier.post_request(view())
    closed = view(**overrides)
    notifier.update_request(channel, ts, closed)
    blocks = slack.messages[ts]["blocks"]
    assert actions_blocks(blocks) == []
    assert outcome(blocks).startswith(expected)
    if closed.status == "expired":
        assert "2030-01-02 03:04 UTC" in outcome(blocks)
        assert outcome(blocks).endswith("— rejected (fail closed)")
        assert "Expired without a decision at 2030-01-02 03:04 UTC" in request_text(closed)


def test_user_text_cannot_inject_mentions_or_links() -> None:
    blocks = request_blocks(
        view(verdict="<!channel> see <http://evil|here> & more", decision_reason=None, metrics=[("<b>", 1.0, 0.5)])
    )
    text = all_text(blocks)
    assert "<!channel>" not in text and "<http://evil" not in text
    assert "&lt;!channel&gt;" in text and "&amp; more" in text and "&lt;b&gt;" in text


def test_a_rejection_says_production_stays_and_links_no_promotion() -> None:
    rejected = view(
        status="rejected",
        decided_by=["U3"],
        next_step="Production stays on v6 and no promotion run starts. The approvals sensor removes the canary "
        "alias within ~10 s.",
    )
    blocks = request_blocks(rejected)
    [next_step] = [b["text"]["text"] for b in blocks if b.get("block_id") == "next_step"]
    assert next_step.startswith("*Next:* Production stays on v6") and "canary alias within ~10 s" in next_step
    assert PROMOTION_RUNS not in all_text(blocks)


def test_the_local_identity_is_named_not_mentioned() -> None:
    blocks = request_blocks(view(status="approved", required_approvals=1, approvals=["local"], decided_by=["local"]))
    assert outcome(blocks) == "✅ Approved by the local operator (1 of 1)"
    assert "<@local>" not in all_text(blocks)


def test_a_report_without_a_set_version_claims_none() -> None:
    text = all_text(request_blocks(view(question_set="", questions=None)))
    assert "Candidate *v7* vs production v6\\n" in text and "re-scored" not in text and "evaluation set" not in text


@pytest.mark.parametrize(
    ("request_fields", "production", "approvals", "expected"),
    [
        ({"status": "approved"}, 6, 1, APPROVED_NEXT),
        (
            {"status": "rejected", "compensation": "remove_canary"},
            6,
            0,
            "Production stays on v6 and no promotion run starts. The approvals sensor removes the canary alias "
            "within ~10 s.",
        ),
        (
            {"status": "expired", "compensation": "remove_canary", "compensated_at": datetime(2030, 1, 2, tzinfo=UTC)},
            None,
            0,
            "No promotion run starts (there is no production model yet). The canary alias was removed.",
        ),
        (
            {"status": "pending", "required_approvals": 3},
            6,
            1,
            "2 more approvals needed; nothing is promoted until then.",
        ),
        ({"status": "pending"}, 6, 0, ""),
        ({"status": "superseded"}, 6, 0, ""),
        (  # seen again once the approvals sensor has launched the run
            {"status": "approved", "promotion_run_id": "run-9"},
            6,
            1,
            "Run run-9 was launched for this decision; production moves to v7 when that run succeeds.",
        ),
        # A rollback's run is the alert sensor's to launch, on its own interval; nothing to compensate.
        (
            {"status": "approved", "promotion_run_id": "alert_sensor"},
            7,
            1,
            "The alert sensor launches the rollback run on its next tick; production moves to v7 when that run "
            "succeeds.",
        ),
        (
            {"status": "rejected", "promotion_run_id": "alert_sensor"},
            7,
            0,
            "Production stays as it is; no rollback run starts.",
        ),
    ],
)
def test_next_step_says_what_follows_and_when(
    request_fields: dict[str, Any], production: int | None, approvals: int, expected: str
) -> None:
    request = {"id": "apr-0001", "candidate_version": 7, "required_approvals": 1, **request_fields}
    assert next_step(request, production_version=production, approvals=approvals, interval_s=10) == expected


def test_dagster_links_have_one_home() -> None:
    announcer = Announcer(cast(Any, None), "secret", "http://ops.local", "http://dagster.local/")
    assert announcer.run_url("run-1") == "http://dagster.local/runs/run-1" and announcer.run_url(None) is None
    assert announcer.asset_url("demo", "embedding_model") == "http://dagster.local/assets/demo/embedding_model"
    request = {"id": "apr-0001"}
    assert announcer.promotion_runs_url(request) == PROMOTION_RUNS  # the runs tagged with the approval id
    assert announcer.promotion_runs_url({**request, "promotion_run_id": "run-9"}) == "http://dagster.local/runs/run-9"
    rollback = {**request, "promotion_run_id": "alert_sensor"}  # tagged by the alert sensor, not with the approval id
    assert announcer.promotion_runs_url(rollback) == "http://dagster.local/runs"


def test_post_thread_and_ephemeral(slack: SlackServer, notifier: SlackNotifier) -> None:
    channel, ts = notifier.post_request(view())
    notifier.post_thread(channel, ts, "<@U9> <@U8> this approval has waited 4h; you are the alternate approvers")
    [reply] = slack.thread_replies(ts)
    assert reply["text"].startswith("<@U9> <@U8> this approval has waited 4h")
    assert reply["channel"] == channel

    notifier.ephemeral(channel, "U5", "You requested this promotion, so you cannot approve it (four eyes).")
    [eph] = slack.ephemerals
    assert (eph["channel"], eph["user"]) == (channel, "U5")
    assert "four eyes" in eph["text"]
    assert slack.calls[-1].method == "chat.postEphemeral"


def test_respond_replaces_the_original_through_response_url(slack: SlackServer, notifier: SlackNotifier) -> None:
    decided = view(status="approved", approvals=["U1", "U2"], decided_by=["U1", "U2"])
    notifier.respond(slack.response_url("click-1"), decided)
    [body] = slack.responses["click-1"]
    assert body["replace_original"] is True
    assert body["text"] == request_text(decided)
    assert body["blocks"] == request_blocks(decided)
    assert actions_blocks(body["blocks"]) == []
    assert slack.calls[-1].method == "response_url:click-1"
    assert all(c.token is None for c in slack.calls)  # response_url needs no token


def test_respond_errors_are_slack_errors(slack: SlackServer, notifier: SlackNotifier) -> None:
    slack.fail_next("response_url", status=404, body="expired_url")
    with pytest.raises(SlackError, match=r"response_url failed: expired_url \(HTTP 404\)"):
        notifier.respond(slack.response_url("late"), view())
    with pytest.raises(SlackError, match="invalid_response_url"):
        notifier.respond("file:///etc/passwd", view())


def test_a_response_url_off_the_hooks_origin_is_never_called(slack: SlackServer, notifier: SlackNotifier) -> None:
    with SlackServer() as other:  # another host (another origin: another port of loopback)
        for url in (other.response_url("elsewhere"), slack.response_url("x").replace("127.0.0.1", "localhost")):
            with pytest.raises(SlackError, match=r"invalid_response_url.*SLACK_HOOKS_URL"):
                notifier.respond(url, view())
            with pytest.raises(SlackError, match="invalid_response_url"):
                notifier.respond_ephemeral(url, "why your click changed nothing")
        assert other.calls == []
    assert slack.calls == []


# ---------------------------------------------------------------------------------------------- errors


def test_invalid_token_is_a_slack_error_without_the_token(slack: SlackServer) -> None:
    wrong = "xoxb-9999-wrong-secret-token-value"
    bad = SlackNotifier(slack_client(wrong, api_url=slack.base_url), CHANNEL)
    with pytest.raises(SlackError) as info:
        bad.post_request(view())
    err = info.value
    assert str(err) == "chat.postMessage failed: invalid_auth"
    assert (err.method, err.error, err.retryable) == ("chat.postMessage", "invalid_auth", False)
    for text in (str(err), repr(err), repr(err.args)):
        assert wrong not in text and TOKEN not in text
    assert err.__cause__ is None and err.__suppress_context__  # the SDK error (it holds the headers) is not shown
    assert slack.messages == {}
    assert slack.calls[-1].token == wrong  # the server saw the bearer token and refused it


def test_update_of_unknown_message(notifier: SlackNotifier) -> None:
    with pytest.raises(SlackError, match=r"^chat\.update failed: message_not_found$"):
        notifier.update_request(CHANNEL, "1700000099.000100", view(status="expired"))


def test_injected_faults(slack: SlackServer, notifier: SlackNotifier) -> None:
    # The client retries 429 twice and 500/503 three times; faults that outlast the retries surface as errors.
    slack.fail_next("chat.postMessage", error="ratelimited", retry_after=1, times=3)
    with pytest.raises(SlackError) as info:
        notifier.post_request(view())
    assert info.value.error == "ratelimited" and info.value.retry_after == 1 and info.value.retryable
    assert "chat.postMessage failed: ratelimited (HTTP 429)" in str(info.value)

    slack.fail_next("chat.postMessage", status=500, times=4)
    with pytest.raises(SlackError) as info:
        notifier.post_request(view())
    assert info.value.status == 500 and info.value.retryable

    slack.fail_next("chat.postMessage", status=503, body="<html>upstream down</html>", times=4)
    with pytest.raises(SlackError, match=r"chat\.postMessage failed: http_503"):
        notifier.post_request(view())

    channel, ts = notifier.post_request(view())  # faults are one-shot
    assert slack.messages[ts]["channel"] == channel


def test_timeout_is_a_slack_error(slack: SlackServer) -> None:
    client = slack_client(TOKEN, api_url=slack.base_url)
    client.timeout = 0.3  # pyright: ignore[reportAttributeAccessIssue]  # slack_sdk annotates int; it is seconds
    slack.fail_next("chat.update", delay=1.0)
    with pytest.raises(SlackError, match=r"chat\.update failed: timeout") as info:
        SlackNotifier(client, CHANNEL).update_request(CHANNEL, "1700000000.000100", view())
    assert info.value.retryable


def test_server_accepts_form_bodies_and_token_field(slack: SlackServer) -> None:
    blocks = request_blocks(view())
    form = urlencode({"token": TOKEN, "channel": CHANNEL, "text": "hi", "blocks": json.dumps(blocks)}).encode()
    req = Request(slack.base_url + "chat.postMessage", data=form, method="POST")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    with urlopen(req, timeout=5) as resp:
        data = json.loads(resp.read())
    assert data["ok"] and slack.messages[data["ts"]]["blocks"] == blocks
    assert "token" not in slack.calls[-1].payload


def test_server_rejects_blocks_beyond_slack_limits(notifier: SlackNotifier) -> None:
    too_long = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    with pytest.raises(SlackError, match="invalid_blocks"):
        notifier._call(
            "chat.postMessage", lambda: notifier.client.chat_postMessage(channel=CHANNEL, text="t", blocks=too_long)
        )


# ---------------------------------------------------------------------------------------------- limits


def test_huge_inputs_stay_within_slack_limits(slack: SlackServer, notifier: SlackNotifier) -> None:
    huge = view(
        verdict="& <" * 5000,
        changed=[{**EVIDENCE["changed_questions"][0], "question": "& <" * 500}] * 50,
        metrics=[(f"metric_{i}_" + "n" * 300, i / 1000, None if i % 3 else i / 2000) for i in range(500)],
        approvals=[f"U{i:08d}" for i in range(300)],
        decision_reason="because " * 2000,
        candidate_version=10**40,
    )
    for status in ("pending", "approved", "rejected", "expired", "superseded"):
        v = view(
            **{**huge.__dict__, "status": status, "decided_by": huge.approvals, "superseded_by": "apr-" + "x" * 5000}
        )
        blocks = request_blocks(v)
        assert block_limit_violations(blocks) == [], status
        for block in blocks:
            if block["type"] == "section":
                assert len(block["text"]["text"]) <= 3000
                assert not block["text"]["text"].rstrip("…").endswith(("&", "&a", "&am", "&l", "&g"))
        assert len(request_text(v)) <= 3000
    blocks = request_blocks(huge)
    assert "more metrics" in all_text(blocks)
    _, ts = notifier.post_request(huge)  # and Slack (our server checks the limits) takes it
    assert slack.messages[ts]["blocks"] == blocks


def test_request_ids_that_cannot_fit_a_block_id_are_refused() -> None:
    with pytest.raises(ValueError, match="too long"):
        view(request_id="apr-" + "x" * 300)
    with pytest.raises(ValueError, match="unknown request status"):
        view(status="maybe")


# ---------------------------------------------------------------------------------------------- interactions


def click(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "message_ts": "1700000000.000100",
        "action_ts": "1700000123.456789",
        "channel_id": CHANNEL,
        "response_url": "https://hooks.slack.com/actions/T0TEST/123/abcdef",
    }
    args.update(overrides)
    return args


def test_parse_interaction_round_trips_every_field() -> None:
    body = interaction_body("apr-0001", "approve", "U1", **click(), user_name="alice", trigger_id="trig.1")
    assert body.startswith(b"payload=%7B%22type%22%3A%22block_actions%22")
    got = parse_interaction(body)
    assert got == Interaction(
        type="block_actions",
        user_id="U1",
        user_name="alice",
        action_id="approve",
        value="apr-0001",
        block_id="approval:apr-0001",
        action_ts="1700000123.456789",
        message_ts="1700000000.000100",
        channel_id=CHANNEL,
        response_url="https://hooks.slack.com/actions/T0TEST/123/abcdef",
        trigger_id="trig.1",
    )
    assert got.dedupe_key == "1700000000.000100:1700000123.456789:U1"
    assert (got.request_id, got.decision) == ("apr-0001", "approved")

    again = parse_interaction(interaction_body("apr-0001", "approve", "U1", **click(), user_name="alice"))
    assert again.dedupe_key == got.dedupe_key  # a redelivered click dedupes
    rejected = parse_interaction(interaction_body("apr-0001", "reject", "U2", **click(action_ts="1700000124.1")))
    assert (rejected.decision, rejected.user_id) == ("rejected", "U2")
    assert rejected.dedupe_key != got.dedupe_key


def test_parse_interaction_of_our_own_message_blocks() -> None:
    payload = interaction_payload("apr-0001", "reject", "U3", **click(), message_blocks=request_blocks(view()))
    assert parse_interaction(encode_payload(payload)).value == "apr-0001"


def _mutated(mutate) -> bytes:
    payload = interaction_payload("apr-0001", "approve", "U1", **click())
    payload = copy.deepcopy(payload)
    mutate(payload)
    return encode_payload(payload)


def _set(path: str, value: Any):
    def mutate(payload: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        cur: Any = payload
        for p in parents:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        if value is _DELETE:
            del cur[last]
        else:
            cur[last] = value

    return mutate


_DELETE = object()
OFF_HOOKS = "is not on Slack's hooks origin https://hooks.slack.com (SLACK_HOOKS_URL)"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"payload=%7Bnot-json", "payload is not JSON"),
        (b"payload=%5B1%2C2%5D", "payload is not a JSON object"),
        (b"other=1", "missing form field 'payload'"),
        (b"", "missing form field 'payload'"),
        (b"payload=%7B%7D&payload=%7B%7D", "form field 'payload' appears more than once"),
        (b"\xff\xfe", "body is not UTF-8"),
        (_mutated(_set("type", "view_submission")), "unsupported interaction type 'view_submission'"),
        (_mutated(_set("type", _DELETE)), "missing field type"),
        (_mutated(_set("user.id", _DELETE)), "missing field user.id"),
        (_mutated(_set("user", _DELETE)), "missing field user.id"),
        (_mutated(_set("user.id", 42)), "field user.id is not a string"),
        (_mutated(_set("actions", [])), "expected exactly one action, got 0"),
        (_mutated(lambda p: p["actions"].append(dict(p["actions"][0]))), "expected exactly one action, got 2"),
        (_mutated(_set("actions", _DELETE)), "missing field actions"),
        (_mutated(_set("actions.0.action_id", "foo")), "unknown action_id 'foo'"),
        (_mutated(_set("actions.0.value", _DELETE)), "missing field actions[0].value"),
        (_mutated(_set("actions.0.action_ts", _DELETE)), "missing field actions[0].action_ts"),
        (
            _mutated(_set("actions.0.block_id", "approval:apr-9999")),
            "actions[0].block_id 'approval:apr-9999' does not match its value 'apr-0001'",
        ),
        (
            _mutated(lambda p: (p["container"].pop("message_ts"), p["message"].pop("ts"))),
            "missing field container.message_ts",
        ),
        (_mutated(lambda p: (p["container"].pop("channel_id"), p.pop("channel"))), "missing field channel.id"),
        (_mutated(_set("response_url", _DELETE)), "missing field response_url"),
        (_mutated(_set("response_url", "file:///etc/passwd")), "field response_url is not an http(s) URL"),
        # Only Slack's hooks origin: no other host, no lookalike, no userinfo trick, no plain http, no other port.
        *(
            (_mutated(_set("response_url", url)), f"field response_url {OFF_HOOKS}")
            for url in (
                "http://127.0.0.1:8000/api/approvals/apr-0001/approve",
                "https://hooks.slack.com.evil.example/actions/T/1/x",
                "https://hooks.slack.com@127.0.0.1/actions/T/1/x",
                "http://hooks.slack.com/actions/T/1/x",
                "https://hooks.slack.com:8443/actions/T/1/x",
            )
        ),
    ],
)
def test_malformed_interactions_say_why(body: bytes, reason: str) -> None:
    with pytest.raises(MalformedInteraction) as info:
        parse_interaction(body)
    assert str(info.value) == reason
    assert isinstance(info.value, ValueError)


def test_parse_falls_back_to_message_and_channel_when_container_is_sparse() -> None:
    body = _mutated(lambda p: p.__setitem__("container", {"type": "message"}))
    got = parse_interaction(body)
    assert (got.message_ts, got.channel_id) == ("1700000000.000100", CHANNEL)


# ---------------------------------------------------------------------------------------------- signing


def test_sign_is_exactly_slacks_scheme() -> None:
    body = interaction_body("apr-0001", "approve", "U1", **click())
    now = int(time.time())
    headers = sign(SECRET, body, now)
    assert set(headers) == {"X-Slack-Request-Timestamp", "X-Slack-Signature"}
    assert headers["X-Slack-Signature"].startswith("v0=") and len(headers["X-Slack-Signature"]) == 67
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid_request(body, headers)
    assert verifier.is_valid_request(body.decode(), headers)

    tampered = bytearray(body)
    tampered[-1] ^= 0x01
    assert not verifier.is_valid_request(bytes(tampered), headers)
    assert not SignatureVerifier(SECRET + "x").is_valid_request(body, headers)
    stale = sign(SECRET, body, now - 301)
    assert not verifier.is_valid_request(body, stale)  # replay window is 5 minutes


def test_sign_matches_slacks_documented_example() -> None:
    # The worked example from Slack's "Verifying requests from Slack" guide.
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
        b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
        b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
        b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    headers = sign(SECRET, body, 1531420618)
    assert headers["X-Slack-Signature"] == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
