"""Every decision has an authenticated identity (real PostgreSQL): the CLI and the JSON API decide only with an
operator key (decide scope, mapped to an approver id) and record that approver, never a name the caller typed;
refusals are audited; four eyes refuses the requester recorded from an authenticated source (the operator's
retrain request, through the real corpus sensor and gate); unauthenticated failures are rate-limited per client
and summed up in the audit log instead of one record each."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from runtime_ops.api.app import create_app
from runtime_ops.cli import main as cli
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops_tests.support.approvals_support import FakeClock, open_pending, operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, serving_v1


def _key_file(tmp_path: Path, key: str) -> str:
    path = tmp_path / f"key-{len(list(tmp_path.glob('key-*')))}"
    path.write_text(key)
    return str(path)


def _attempts(store: StateStore, request_id: str) -> list[dict[str, Any]]:
    return [r for r in store.audit_log.records(request_id) if r["event"] == "attempt"]


def test_cli_decisions_need_an_operator_key_and_record_its_approver(
    env: Any, postgres_url: str, tmp_path: Path, capsys: Any
) -> None:
    env(database_url=postgres_url)
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U2", "U3")))
    rid = request["id"]
    reader = store.api_keys.create("reader", ["read"]).key
    unmapped = store.api_keys.create("unmapped", ["decide"]).key
    revoked = store.api_keys.create("gone", ["decide"], approver="U2")
    store.api_keys.revoke(revoked.info.key_id)
    u2 = store.api_keys.create("u2", ["decide"], approver="U2").key

    refusals = [
        ([], "no operator credential: set RUNTIME_OPS_OPERATOR_KEY"),  # --as alone is not an identity
        (["--key-file", _key_file(tmp_path, reader)], "lacks the decide scope"),
        (["--key-file", _key_file(tmp_path, unmapped)], "is not mapped to an approver id"),
        (["--key-file", _key_file(tmp_path, revoked.key)], "unknown or revoked operator key"),
        (["--key-file", _key_file(tmp_path, u2 + "x")], "unknown or revoked operator key"),
        (["--key-file", _key_file(tmp_path, u2), "--as", "U3"], "--as U3 but API key"),  # someone else's name
    ]
    for extra, message in refusals:
        args = ["approvals", "approve", rid, *extra]
        if "--as" not in extra:
            args += ["--as", "U2"]
        assert cli(args) == 1, extra
        assert message in capsys.readouterr().err, extra
    attempts = _attempts(store, rid)
    assert [a["outcome"] for a in attempts] == ["unauthenticated"] * len(refusals)
    assert all(a["channel"] == "cli" and a["detail"]["action"] == "approve" for a in attempts)
    assert store.requests.get_request(rid)["status"] == "pending" and store.votes.for_request(rid) == []

    # The environment variable works as well as a file; the actor is the key's approver.
    env(database_url=postgres_url, RUNTIME_OPS_OPERATOR_KEY=u2)
    assert cli(["approvals", "approve", rid]) == 0
    assert "approved by U2" in capsys.readouterr().out
    [vote] = store.votes.for_request(rid)
    assert (vote["actor"], vote["channel"]) == ("U2", "cli")
    assert store.requests.get_request(rid)["decided_by"] == "U2"
    assert u2[13:] not in capsys.readouterr().err
    assert store.audit_log.verify().ok


def test_api_decisions_are_recorded_as_the_keys_approver_and_four_eyes_holds(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url)
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U2", "U3"), required_approvals=2), requested_by="U2")
    rid = request["id"]
    client = TestClient(create_app(get_settings()))

    def post(key: str | None, action: str = "approve", **body: str) -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return client.post(f"/api/approvals/{rid}/{action}", json=body or None, headers=headers)

    assert post(None).status_code == 401
    assert post(store.api_keys.create("reader", ["read"]).key).status_code == 403
    unmapped = post(store.api_keys.create("bot", ["decide"]).key)
    assert unmapped.status_code == 403 and "not mapped to an approver id" in unmapped.json()["error"]
    [attempt] = _attempts(store, rid)
    assert (attempt["channel"], attempt["outcome"]) == ("api", "unauthorised")

    u2, u3 = (store.api_keys.create(a, ["decide"], approver=a).key for a in ("U2", "U3"))
    own = post(u2)  # U2 requested this candidate: four eyes
    assert own.status_code == 403 and own.json()["outcome"] == "self_approval" and "four eyes" in own.json()["message"]
    assert post(u3, "reject").status_code == 400  # a rejection names its reason
    counted = post(u3)
    assert counted.status_code == 200 and counted.json() == {
        "outcome": "recorded",
        "message": f"approval 1 of 2 recorded for {rid} (U3)",
        "actor": "U3",
        "status": "pending",
    }
    assert post(u3).json()["outcome"] == "duplicate_vote"
    assert [(v["actor"], v["channel"]) for v in store.votes.for_request(rid)] == [("U3", "api")]
    assert store.audit_log.verify().ok


def test_four_eyes_refuses_the_operator_who_asked_for_the_retrain(
    env: Any, postgres_url: str, dagster_instance: Any, tmp_path: Path, capsys: Any
) -> None:
    """alice asks for a retrain with her operator key; the candidate's request names her (from her authenticated
    request, not from a run tag), so she cannot approve it; bob can."""
    from runtime_ops.demo import CORPUS_DIR

    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), RUNTIME_OPS_APPROVERS="alice,bob", **NEEDS_A_HUMAN)
    store, flow = serving_v1(landing, dagster_instance)
    shutil.copytree(CORPUS_DIR / "stdlib" / "text", landing / "stdlib" / "text")
    flow.tick_and_run("landing_sensor")
    assert cli(["retrain", "demo", "--reason", "the text docs landed", "--as", "alice"]) == 1  # no key: refused
    assert "no operator credential" in capsys.readouterr().err
    assert operator_cli(["retrain", "demo", "--reason", "the text docs landed", "--as", "alice"]) == 0
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.dagster_run.tags["runtime_ops/retrain_trigger"] == "manual" and train.success  # waits for a person
    [pending] = store.requests.list_requests(status="pending")
    assert pending["requested_by"] == "alice"
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 1
    assert "four eyes" in capsys.readouterr().out
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "bob"]) == 0
    assert store.requests.get_request(pending["id"])["decided_by"] == "bob"
    # The approvals sensor's tick anchors the audit heads that moved; verify checks the log against them.
    capsys.readouterr()
    [promotion] = flow.tick("approvals_sensor")
    assert promotion.run_key == pending["id"]
    assert cli(["audit", "verify"]) == 0
    anchored = re.search(r"checked against (\d+) anchors", capsys.readouterr().out)
    assert anchored is not None and int(anchored[1]) >= 1


def test_a_sensor_launched_candidate_has_the_system_as_requester(
    env: Any, postgres_url: str, dagster_instance: Any, tmp_path: Path
) -> None:
    """Growth retrains on the policy: nobody asked, so nobody is excluded, whatever tag a run carries."""
    from runtime_ops_tests.support.flow import pending_candidate

    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), **NEEDS_A_HUMAN)
    _, pending, _ = pending_candidate(landing, dagster_instance)
    assert pending["requested_by"] == "system"


def test_unauthenticated_failures_are_rate_limited_and_summed_in_the_audit_log(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url)
    store = open_store(get_settings().resolved_database_url, get_settings())
    clock = FakeClock()
    app = create_app(get_settings(), clock=clock.now)
    refusals = app.state.ops.refusals
    burst = refusals.policy.burst
    reader = store.api_keys.create("reader", ["read"]).key
    before = len(store.audit_log.records())
    with TestClient(app) as client:
        statuses = [client.get("/api/approvals", headers={"Authorization": "Bearer rok_00000000_x"}).status_code]
        statuses += [client.get("/api/approvals").status_code for _ in range(299)]
        assert statuses[:burst] == [401] * burst and set(statuses[burst:]) == {429}
        limited = client.get("/api/approvals")
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        # A valid key is never limited: only failures spend the bucket.
        assert client.get("/api/approvals", headers={"Authorization": f"Bearer {reader}"}).status_code == 200
        # 301 refusals so far, one audit record (the first); the rest wait for the window to close.
        assert len(store.audit_log.records()) == before + 1
        clock.advance(seconds=refusals.policy.window_s + 1)  # refilled, and the window closed
        assert client.get("/api/approvals").status_code == 401
    records = store.audit_log.records()[before:]
    assert [(r["event"], r["outcome"]) for r in records] == [
        ("attempt", "unauthenticated"),
        ("refusals", "unauthenticated"),
        ("attempt", "unauthenticated"),
    ]
    summary = records[1]["detail"]
    assert summary["count"] == 300 and summary["limited"] == 300 - burst + 1
    assert summary["clients"] == [["testclient", 300]]
    assert dict(map(tuple, summary["reasons"])) == {"no API key": 300}
    assert store.audit_log.verify().ok


@pytest.mark.parametrize("channel", ["landing", "alerts", "link"])
def test_the_token_and_link_routes_are_rate_limited_too(env: Any, postgres_url: str, channel: str) -> None:
    env(database_url=postgres_url, RUNTIME_OPS_WEBHOOK_SECRET="hook", RUNTIME_OPS_ALERT_TOKEN="alert-token")
    app = create_app(get_settings(), clock=FakeClock().now)
    burst = app.state.ops.refusals.policy.burst
    with TestClient(app) as client:
        if channel == "landing":
            send = lambda: client.post("/webhooks/landing", headers={"X-Runtime-Ops-Token": "nope"}, json={})  # noqa: E731
        elif channel == "alerts":
            send = lambda: client.post("/alerts/alertmanager", headers={"Authorization": "Bearer no"}, json={})  # noqa: E731
        else:
            send = lambda: client.post("/approvals/not-a-token", data={"action": "approve"})  # noqa: E731
        codes = [send().status_code for _ in range(burst + 3)]
    assert 429 not in codes[:burst] and codes[burst:] == [429] * 3
