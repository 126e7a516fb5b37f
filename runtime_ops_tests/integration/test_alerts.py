"""The alert inbox and remediation: the real Alertmanager posting to the ops API, the alert sensor's rules,
a pre-approved and a gated rollback of `production` on real PostgreSQL and Redis (fenced writes)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest
from sqlalchemy import select, text

from runtime_ops.settings import get_settings
from runtime_ops.store import AliasConflict, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support import web
from runtime_ops_tests.support.alertmanager import Alertmanager
from runtime_ops_tests.support.approvals_support import ApiServer, operator_cli
from runtime_ops_tests.support.fencing import remove_fenced, set_fenced
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow, serving_v1, serving_v2

pytestmark = pytest.mark.slow(seconds=68)  # alone on 2 cores (Dec 2026): started first, see conftest.py


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------- helpers
def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def webhook(*alerts: dict[str, Any], status: str = "firing") -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="test"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "runtime-ops",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.test",
        "alerts": list(alerts),
    }


def alert(
    name: str, fingerprint: str, starts_at: str, *, status: str = "firing", ends_at: str | None = None, **labels: str
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": name, **labels},
        "annotations": {"summary": f"{name} fired"},
        "startsAt": starts_at,
        "endsAt": ends_at or "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.test/graph",
        "fingerprint": fingerprint,
    }


class Inbox:
    """The ops API over the test's settings, served by uvicorn on a free port (ApiServer)."""

    def __init__(self) -> None:
        self.server = ApiServer(get_settings()).start()
        self.client = httpx.Client(base_url=self.server.url, timeout=10)
        self.read = self.server.key_headers("read")

    def post(self, payload: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
        return self.client.post("/alerts/alertmanager", content=body, headers=headers)

    def alerts(self, **params: Any) -> list[dict[str, Any]]:
        response = self.client.get("/api/alerts", params=params, headers=self.read)
        assert response.status_code == 200, response.text
        return response.json()

    def close(self) -> None:
        self.client.close()
        self.server.stop()


@pytest.fixture
def open_inbox() -> Iterator[Callable[[], Inbox]]:
    """`open_inbox()` starts the ops API with the settings of that moment; stopped at teardown."""
    opened: list[Inbox] = []

    def factory() -> Inbox:
        opened.append(Inbox())
        return opened[-1]

    yield factory
    for inbox in opened:
        inbox.close()


def write_rules(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text("version: 1\nrules:\n" + body)
    return path


def fence_of(store: Any, alias: str) -> int:
    with store.tx() as conn:
        return int(conn.execute(select(t.aliases.c.fence).where(t.aliases.c.name == alias)).scalar_one())


def production_v1(env: Any, postgres_url: str, redis_url: str, instance: Any, tmp_path: Path, **extra: str) -> Any:
    """Documents landed, model v1 trained, auto-approved (nothing to beat) and serving."""
    landing = tmp_path / "landing"
    # The alert webhook opened on purpose, as `runtime-ops dev` opens it on loopback (no token to send).
    extra = {"RUNTIME_OPS_ALERT_OPEN": "true", **extra}
    env(database_url=postgres_url, landing=str(landing), REDIS_URL=redis_url, **NEEDS_A_HUMAN, **extra)
    store, flow = serving_v1(landing, instance)
    return store, flow, landing


def production_v2(env: Any, postgres_url: str, redis_url: str, instance: Any, tmp_path: Path, **extra: str) -> Any:
    """Production v2, promoted through a human approval over v1 (alias history: -> v1 -> v2)."""
    landing = tmp_path / "landing"
    extra = {"RUNTIME_OPS_ALERT_OPEN": "true", **extra}
    env(database_url=postgres_url, landing=str(landing), REDIS_URL=redis_url, **NEEDS_A_HUMAN, **extra)
    return serving_v2(landing, instance)


# ---------------------------------------------------------------------------------------------- the real Alertmanager
def test_alertmanager_to_inbox_to_one_remediation_run_and_resolve(
    env, postgres_url, redis_url, dagster_instance, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    token = "am-webhook-secret"
    rules = write_rules(
        tmp_path,
        "  - name: index-corrupt\n"
        "    match: {alertname: RetrievalIndexCorrupt}\n"
        "    match_re: {severity: page|critical}\n"
        "    action: reembed\n"
        "  - name: everything-else\n"
        "    action: notify\n",
    )
    store, flow, _ = production_v1(
        env,
        postgres_url,
        redis_url,
        dagster_instance,
        tmp_path,
        RUNTIME_OPS_ALERT_RULES=str(rules),
        RUNTIME_OPS_ALERT_TOKEN=token,
    )
    index_before = store.indexes.current_index()
    api = ApiServer(get_settings()).start()
    read = api.key_headers("read")
    am = Alertmanager(tmp_path / "am", f"{api.url}/alerts/alertmanager", bearer_token=token)
    try:
        am.start()
        am.amtool("alert", "add", "RetrievalIndexCorrupt", "severity=page", "--annotation=summary=index is corrupt")

        def inbox() -> list[dict[str, Any]]:
            return web.get(f"{api.url}/api/alerts", headers=read, timeout=5).json()

        [entry] = wait_for(inbox, 30, "the alert to reach the inbox")
        assert entry["status"] == "firing" and entry["alertname"] == "RetrievalIndexCorrupt"
        assert entry["labels"] == {"alertname": "RetrievalIndexCorrupt", "severity": "page"}
        assert entry["annotations"] == {"summary": "index is corrupt"} and entry["ends_at"] is None
        assert entry["receiver"] == "runtime-ops"

        [request] = flow.tick("alert_sensor")  # the matching rule: one remediation run
        assert request.job_name == "demo__reembed_job"
        assert request.run_key == f"alert-{entry['fingerprint']}-" + datetime.fromisoformat(
            entry["starts_at"]
        ).astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        assert request.tags["runtime_ops/alertname"] == "RetrievalIndexCorrupt"
        assert request.tags["runtime_ops/alert_fingerprint"] == entry["fingerprint"]
        result = flow.run("alert_sensor", request)
        assert result.success
        [embeddings, index] = result.asset_materializations_for_node("demo__reembed_embeddings")
        assert embeddings.metadata["dropped"].value == embeddings.metadata["embedded_now"].value > 0
        assert index.metadata["model_version"].value == 1
        assert (
            store.embeddings.embedding_counts(1)["embedded"] == store.embeddings.embedding_counts(1)["current_chunks"]
        )
        assert store.indexes.current_index()["model_version"] == 1
        assert store.indexes.current_index()["id"] == index_before["id"]  # the same vectors: the same index

        assert flow.tick("alert_sensor") == []  # records the run id and its outcome
        [row] = store.alerts.list_alerts()
        assert (row["action_status"], row["run_id"], row["rule"]) == ("succeeded", result.run_id, "index-corrupt")

        # Re-firing the same alert (Alertmanager keeps its startsAt) and a redelivery of the webhook launch
        # nothing more: same (fingerprint, startsAt), same entry.
        am.amtool("alert", "add", "RetrievalIndexCorrupt", "severity=page", "--annotation=summary=index is corrupt")
        [am_alert] = am.alerts()
        assert am_alert["fingerprint"] == entry["fingerprint"]
        # Merged into the same firing period (Alertmanager's API shows startsAt to the millisecond only).
        assert abs(_instant(am_alert["startsAt"]) - _instant(entry["starts_at"])) < timedelta(milliseconds=1)
        redelivery = webhook(alert("RetrievalIndexCorrupt", entry["fingerprint"], entry["starts_at"], severity="page"))
        response = web.post(
            f"{api.url}/alerts/alertmanager", json=redelivery, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200 and response.json()["duplicate"] == 1
        time.sleep(3)  # past group_interval: anything Alertmanager had to send has arrived
        assert len(inbox()) == 1
        assert flow.tick("alert_sensor") == []

        am.resolve(am_alert["labels"], entry["starts_at"])
        wait_for(lambda: inbox()[0]["status"] == "resolved", 30, "the resolved notification")
        [closed] = inbox()  # the same entry, closed
        assert (closed["id"], closed["starts_at"]) == (entry["id"], entry["starts_at"])
        assert closed["ends_at"] is not None and closed["resolved_at"] is not None
        assert closed["run_id"] == result.run_id  # closing keeps what was done about it
        assert flow.tick("alert_sensor") == []
    finally:
        am.stop()
        api.stop()


# ---------------------------------------------------------------------------------------------- rollbacks
def test_preapproved_rollback_moves_production_back_with_a_fenced_write(
    env, postgres_url, redis_url, dagster_instance, tmp_path, open_inbox
) -> None:  # type: ignore[no-untyped-def]
    rules = write_rules(
        tmp_path,
        "  - name: quality\n"
        "    match: {alertname: RetrievalQualityRegressed}\n"
        "    action: rollback\n"
        "    preapproved: true\n",
    )
    store, flow = production_v2(
        env, postgres_url, redis_url, dagster_instance, tmp_path, RUNTIME_OPS_ALERT_RULES=str(rules)
    )
    inbox = open_inbox()
    fired = alert("RetrievalQualityRegressed", "0a1b2c3d4e5f6071", "2026-11-29T10:00:00Z", severity="page")
    assert inbox.post(webhook(fired)).json()["new"] == 1
    fence_before = fence_of(store, "production")
    history_before = store.registry.alias_history("production")

    [request] = flow.tick("alert_sensor")
    assert request.job_name == "demo__rollback_job"
    assert request.run_config["ops"]["demo__rollback_production"]["config"]["from_version"] == 2
    assert request.run_config["ops"]["demo__rollback_production"]["config"]["to_version"] == 1
    # Retried only when its worker dies, never after its step failed (a refused rollback is not re-run).
    assert request.tags["dagster/retry_on_asset_or_op_failure"] == "false"

    # During the remediation: a redelivery is a no-op, a new firing period of the same alert is suppressed.
    assert inbox.post(webhook(fired)).json()["duplicate"] == 1
    again = alert("RetrievalQualityRegressed", "0a1b2c3d4e5f6071", "2026-11-29T10:07:00Z", severity="page")
    assert inbox.post(webhook(again)).json()["new"] == 1
    assert flow.tick("alert_sensor") == []
    suppressed = next(a for a in inbox.alerts() if a["starts_at"].startswith("2026-11-29T10:07"))
    assert suppressed["action_status"] == "suppressed"
    assert "remediation in progress" in suppressed["action_detail"]

    result = flow.run("alert_sensor", request)
    assert result.success
    assert store.registry.alias("production") == 1
    assert store.indexes.current_index()["model_version"] == 1  # the saga swapped the index back too
    moved = store.registry.alias_history("production")[len(history_before) :]
    assert [(h["old_target"], h["new_target"], h["actor"]) for h in moved] == [(2, 1, "rollback:preapproved")]
    fence_after = fence_of(store, "production")
    assert fence_after > fence_before
    [materialization, serving] = result.asset_materializations_for_node("demo__rollback_production")
    assert materialization.asset_key == dg.AssetKey(["demo", "production_model"])
    assert materialization.metadata["rollback"].value is True
    assert materialization.metadata["fence"].value == fence_after
    # Serving moved back in the same run, and says so (answers downstream follow the rollback at once).
    assert serving.asset_key == dg.AssetKey(["demo", "retrieval_index"])
    assert serving.metadata["index_id"].value == store.indexes.current_index()["id"]

    # A holder with an older fencing token cannot move production any more.
    with pytest.raises(AliasConflict, match="older than"):
        store.registry.set_alias("production", 2, actor="stale-holder", fence=fence_before)
    assert store.registry.alias("production") == 1

    assert flow.tick("alert_sensor") == []
    first = next(a for a in inbox.alerts() if a["starts_at"].startswith("2026-11-29T10:00"))
    assert first["action_status"] == "succeeded" and first["run_id"] == result.run_id
    assert first["run_key"] == "alert-0a1b2c3d4e5f6071-20261129T100000.000000Z"

    # Re-executing the rollback (a retried run) finds its saga done: production moved once.
    assert flow.run("alert_sensor", request).success
    assert len(store.registry.alias_history("production")) == len(history_before) + 1

    # Once it is over, a new alert has nothing to roll back to: v1's predecessor v2 was rolled back from.
    inbox.post(webhook(alert("RetrievalQualityRegressed", "0a1b2c3d4e5f6071", "2026-11-29T10:30:00Z")))
    assert flow.tick("alert_sensor") == []
    latest = inbox.alerts()[0]
    assert latest["action_status"] == "error" and "no previous version" in latest["action_detail"]


def test_gated_rollback_waits_for_approval_then_rolls_back(
    env, postgres_url, redis_url, dagster_instance, tmp_path, open_inbox, capsys
) -> None:  # type: ignore[no-untyped-def]
    rules = write_rules(
        tmp_path,
        "  - name: quality\n    match: {alertname: RetrievalQualityRegressed}\n    action: rollback\n",
    )
    store, flow = production_v2(
        env, postgres_url, redis_url, dagster_instance, tmp_path, RUNTIME_OPS_ALERT_RULES=str(rules)
    )
    inbox = open_inbox()
    inbox.post(webhook(alert("RetrievalQualityRegressed", "feedc0de12345678", "2026-11-29T11:00:00Z")))
    assert flow.tick("alert_sensor") == []  # no run yet: a human decides first
    [entry] = inbox.alerts()
    assert entry["action_status"] == "awaiting_approval"
    request = store.requests.get_request(entry["approval_id"])
    assert (request["kind"], request["status"], request["candidate_version"]) == ("human", "pending", 1)
    assert request["requested_by"] == "alertmanager:RetrievalQualityRegressed"
    assert store.registry.alias("production") == 2

    assert flow.tick("approvals_sensor") == []  # announced (signed links in the log), nothing launched
    assert store.requests.get_request(request["id"])["notified_at"] is not None
    capsys.readouterr()
    assert operator_cli(["approvals", "approve", request["id"], "--as", "bob", "--reason", "v2 answers worse"]) == 0
    said = capsys.readouterr().out  # what the approver is shown is the rollback, not v1's old evaluation or a ramp
    assert "Roll back demo from v2 to v1?" in said and "Approved:" in said, said
    assert "ramp" not in said and "first model" not in said, said
    assert flow.tick("approvals_sensor") == []  # the alert sensor launches rollbacks, not promotion_job

    [run_request] = flow.tick("alert_sensor")
    assert run_request.job_name == "demo__rollback_job"
    assert run_request.tags["runtime_ops/rollback_approval_id"] == request["id"]
    result = flow.run("alert_sensor", run_request)
    assert result.success
    assert store.registry.alias("production") == 1
    last = store.registry.alias_history("production")[-1]
    assert (last["old_target"], last["new_target"], last["actor"], last["approval_id"]) == (
        2,
        1,
        "rollback:bob",
        request["id"],
    )
    assert flow.tick("alert_sensor") == []
    assert store.requests.get_request(request["id"])["promotion_run_id"] == result.run_id
    assert inbox.alerts()[0]["action_status"] == "succeeded"
    assert store.audit_log.verify().ok
    assert any(r["event"] == "promoted" for r in store.audit_log.records(request["id"]))


def _production_feedback(store: Any, ago: timedelta, helpful: int, judged: int) -> None:
    """`judged` requests production served alone `ago`, `helpful` of them judged helpful, the rest not_helpful."""
    from runtime_ops.online.query_records import QueryRecord, ShownItem
    from runtime_ops.online.request_ids import new_request_id

    at = datetime.now(UTC) - ago
    records = [
        QueryRecord(
            new_request_id(at), "demo", "search", "production", at, 1, 1.0, 2, 1, items=(ShownItem(1, 7, 1, "a.md"),)
        )
        for _ in range(judged)
    ]
    store.query_log.record(records)
    for i, r in enumerate(records):
        signal = "helpful" if i < helpful else "not_helpful"
        assert store.query_log.add_feedback(r.request_id, 7, signal, None, "rok_test", at)


def test_an_alerts_rollback_request_reads_as_a_rollback_on_every_channel(
    env, postgres_url, redis_url, dagster_instance, tmp_path, open_inbox, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Issue 39 item 5: the request an alert opens says "Roll back demo from v2 to v1?", names the alert, its firing
    time, production's helpful share now and before, both versions and what approve and reject do: on the page,
    in Slack and in the CLI; `approvals show --json` and `/api/approvals/{id}` carry the same facts."""
    from runtime_ops.approvals import links
    from runtime_ops.cli import main as cli
    from runtime_ops_tests.support.slack_server import SlackServer

    rules = write_rules(
        tmp_path, "  - name: quality\n    match: {alertname: RetrievalQualityRegressed}\n    action: rollback\n"
    )
    with SlackServer() as slack:
        store, flow = production_v2(
            env, postgres_url, redis_url, dagster_instance, tmp_path,
            RUNTIME_OPS_ALERT_RULES=str(rules), RUNTIME_OPS_APPROVERS="alice,bob", SLACK_BOT_TOKEN="xoxb-test-token",
            SLACK_APPROVAL_CHANNEL="C0ROLL", SLACK_API_URL=slack.base_url,
        )  # fmt: skip
        _production_feedback(store, timedelta(hours=3), helpful=9, judged=10)  # the day before: 90 %
        _production_feedback(store, timedelta(minutes=5), helpful=2, judged=10)  # the last 30 min: 20 %
        inbox = open_inbox()
        inbox.post(webhook(alert("RetrievalQualityRegressed", "feedc0de12345678", "2026-11-29T11:00:00Z")))
        assert flow.tick("alert_sensor") == []
        [entry] = inbox.alerts()
        request = store.requests.get_request(entry["approval_id"])
        posted = len(slack.calls_to("chat.postMessage"))
        assert flow.tick("approvals_sensor") == []  # announced in Slack
        [post] = slack.calls_to("chat.postMessage")[posted:]

        facts = [
            "Roll back demo from v2 to v1?",
            f"alert #{entry['id']} RetrievalQualityRegressed fired at 2026-11-29 11:00:00 UTC (rule quality)",
            "helpful share now (last 30 min) 20% helpful (2 of 10 judgements), before (the day before) 90% helpful "
            "(9 of 10 judgements): -70 points",
            "production is v2; a rollback restores v1",
            "production moves back from v2 to v1",
            "the v2 candidate is marked rolled back",
            "production stays on v2; the alert stays open and no rollback run starts",
        ]
        blocks = json.dumps(post.payload["blocks"])
        assert post.payload["blocks"][0]["text"]["text"] == "Roll back demo from v2 to v1?"
        for fact in facts[1:]:
            assert fact in blocks, fact
        assert "Promote" not in blocks and "no rollout" not in blocks
        assert post.payload["text"].startswith("Roll back demo from v2 to v1?")

        token = links.issue(
            get_settings().resolved_link_secret(), request_id=request["id"], approver="alice",
            digest=request["candidate_digest"], expires_at=datetime.now(UTC) + timedelta(hours=1),
        )  # fmt: skip
        page = inbox.client.get(f"/approvals/{token}")
        assert page.status_code == 200, page.text
        html = page.text.replace("&#x27;", "'")
        assert "<h1>Roll back demo from v2 to v1?</h1>" in html
        for fact in facts[1:]:
            assert fact in html, fact
        assert "Promote model" not in html and "Evaluation verdict" not in html

        capsys.readouterr()
        assert cli(["approvals", "show", request["id"]]) == 0
        shown = capsys.readouterr().out
        assert shown.startswith(f"{request['id']}: Roll back demo from v2 to v1? · pending")
        for fact in facts[1:]:
            assert fact in shown, fact
        assert cli(["approvals", "list"]) == 0
        listed = capsys.readouterr().out
        assert any(request["id"] in line and "rollback v2 -> v1" in line for line in listed.splitlines())
        assert cli(["approvals", "show", request["id"], "--json"]) == 0
        evidence = json.loads(capsys.readouterr().out)["evidence"]
        assert evidence["rollback"]["live"]["now"] == {"helpful": 2, "judged": 10}
        assert evidence["rollback"]["live"]["before"] == {"helpful": 9, "judged": 10}
        api = inbox.client.get(f"/api/approvals/{request['id']}", headers=inbox.read).json()
        assert api["evidence"]["rollback"] == evidence["rollback"]
        assert (api["evidence"]["rollback"]["from_version"], api["evidence"]["rollback"]["to_version"]) == (2, 1)

        # Rejected: the message says what that means, once.
        assert operator_cli(["approvals", "reject", request["id"], "--as", "bob", "--reason", "false alarm"]) == 0
        updates = len(slack.calls_to("chat.update"))
        flow.tick("approvals_sensor")
        [update] = slack.calls_to("chat.update")[updates:]
        assert "Not rolled back: production stays on v2; the alert stays open" in json.dumps(update.payload["blocks"])
        flow.tick("approvals_sensor")
        assert len(slack.calls_to("chat.update")) == updates + 1
        assert store.registry.alias("production") == 2


def test_rollback_is_a_compare_and_set_on_production(
    env, postgres_url, redis_url, dagster_instance, tmp_path, open_inbox
) -> None:  # type: ignore[no-untyped-def]
    from runtime_ops.alerts.rollback import run_rollback
    from runtime_ops.components.loading import get_spec
    from runtime_ops.locks.factory import open_locker
    from runtime_ops.serving.vector_store import pipeline_vectors

    rules = write_rules(
        tmp_path, "  - name: q\n    match: {alertname: Q}\n    action: rollback\n    preapproved: true\n"
    )
    store, flow = production_v2(
        env, postgres_url, redis_url, dagster_instance, tmp_path, RUNTIME_OPS_ALERT_RULES=str(rules)
    )
    inbox = open_inbox()
    inbox.post(webhook(alert("Q", "1234567890abcdef", "2026-11-29T12:00:00Z")))
    [request] = flow.tick("alert_sensor")  # planned: v2 -> v1
    remove_fenced(store, "production", actor="operator")  # production changed before the run started
    result = flow.run("alert_sensor", request)
    assert not result.success
    failure = result.failure_data_for_node("demo__rollback_production")
    assert "production is unset, not v2 as when the alert fired" in str(failure.error)
    assert store.registry.alias("production") is None
    flow.tick("alert_sensor")
    assert store.alerts.list_alerts()[0]["action_status"] == "failed"

    # Production already where the rollback would take it: nothing to do, nothing written.
    set_fenced(store, "production", 1, actor="operator")
    history = store.registry.alias_history("production")
    outcome = run_rollback(
        store,
        open_locker(get_settings()),
        pipeline_vectors(get_spec("demo")),
        alert_key="alert-manual",
        alert_ref="alert-0",
        from_version=2,
        to_version=1,
        approval_id=None,
        run_id=None,
    )
    assert outcome.status == "noop" and store.registry.alias_history("production") == history

    # A later alert plans from production as it is now (v1, set by hand) to the version before it (v2).
    inbox.post(webhook(alert("Q", "fedcba0987654321", "2026-11-29T12:05:00Z")))
    [second] = flow.tick("alert_sensor")
    assert second.run_config["ops"]["demo__rollback_production"]["config"]["to_version"] == 2


# ---------------------------------------------------------------------------------------------- the inbox API
@pytest.fixture
def inbox_pg(env, postgres_url, open_inbox) -> Inbox:  # type: ignore[no-untyped-def]
    env(database_url=postgres_url, RUNTIME_OPS_ALERT_TOKEN="s3cret")
    return open_inbox()


AUTH = {"Authorization": "Bearer s3cret"}


def test_without_a_token_the_webhook_is_closed_unless_opened_for_local_use(env, postgres_url, open_inbox) -> None:  # type: ignore[no-untyped-def]
    env(database_url=postgres_url)
    closed = open_inbox()
    refused = closed.post(webhook(alert("A", "aaaaaaaaaaaaaaaa", "2026-11-29T10:00:00Z")))
    assert refused.status_code == 403 and "RUNTIME_OPS_ALERT_TOKEN" in refused.json()["error"]
    assert closed.alerts() == [], "nothing was recorded"
    env(database_url=postgres_url, RUNTIME_OPS_ALERT_OPEN="true")
    opened = open_inbox()
    assert opened.post(webhook(alert("A", "aaaaaaaaaaaaaaaa", "2026-11-29T10:00:00Z"))).json()["new"] == 1


def test_inbox_is_idempotent_by_fingerprint_and_starts_at(inbox_pg: Inbox) -> None:
    a1 = alert("A", "aaaaaaaaaaaaaaaa", "2026-11-29T10:00:00.123456789Z")
    a2 = alert("B", "bbbbbbbbbbbbbbbb", "2026-11-29T10:00:00+02:00")
    first = inbox_pg.post(webhook(a1, a2), AUTH)
    assert first.status_code == 200 and first.json()["new"] == 2
    assert inbox_pg.post(webhook(a1, a2), AUTH).json() | {"status": "recorded"} == {
        "status": "recorded",
        "alerts": 2,
        "new": 0,
        "resolved": 0,
        "refired": 0,
        "duplicate": 2,
    }
    # The same instant written in another offset is the same key.
    same = alert("B", "bbbbbbbbbbbbbbbb", "2026-11-29T08:00:00Z")
    assert inbox_pg.post(webhook(same), AUTH).json()["duplicate"] == 1
    closed = alert("A", "aaaaaaaaaaaaaaaa", a1["startsAt"], status="resolved", ends_at="2026-11-29T10:05:00Z")
    assert inbox_pg.post(webhook(closed, status="resolved"), AUTH).json()["resolved"] == 1
    assert inbox_pg.post(webhook(closed, status="resolved"), AUTH).json()["duplicate"] == 1
    rows = {r["alertname"]: r for r in inbox_pg.alerts()}
    assert rows["A"]["status"] == "resolved" and rows["A"]["ends_at"].startswith("2026-11-29T10:05:00")
    assert rows["B"]["status"] == "firing" and rows["B"]["starts_at"].startswith("2026-11-29T08:00:00")
    assert [r["alertname"] for r in inbox_pg.alerts(status="resolved")] == ["A"]
    # Alertmanager re-opens an alert it resolved on a timeout with the same startsAt: firing again.
    assert inbox_pg.post(webhook(a1), AUTH).json()["refired"] == 1
    assert {r["alertname"]: r["status"] for r in inbox_pg.alerts()} == {"A": "firing", "B": "firing"}
    # A new firing period of the same alert is a new entry.
    later = alert("A", "aaaaaaaaaaaaaaaa", "2026-11-29T11:00:00Z")
    assert inbox_pg.post(webhook(later), AUTH).json()["new"] == 1
    assert len(inbox_pg.alerts()) == 3
    assert inbox_pg.client.get("/api/alerts", params={"status": "open"}, headers=inbox_pg.read).status_code == 400


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "body is not JSON"),
        (json.dumps({**webhook(), "version": "3"}).encode(), "version: Input should be '4'"),
        (json.dumps(webhook(alert("A", "x!", "2026-11-29T10:00:00Z"))).encode(), "alerts.0.fingerprint"),
        (json.dumps(webhook(alert("A", "abc", "2026-11-29T10:00:00"))).encode(), "alerts.0.startsAt"),
    ],
)
def test_malformed_webhooks_get_400_and_record_nothing(inbox_pg: Inbox, body: bytes, reason: str) -> None:
    response = inbox_pg.post(body, AUTH)
    assert response.status_code == 400 and reason in response.json()["error"]
    assert inbox_pg.alerts() == []


def test_the_bearer_token_is_required_when_configured(inbox_pg: Inbox) -> None:
    payload = webhook(alert("A", "abc", "2026-11-29T10:00:00Z"))
    assert inbox_pg.post(payload).status_code == 401
    assert inbox_pg.post(payload, {"Authorization": "Bearer wrong"}).status_code == 401
    assert inbox_pg.alerts() == []
    assert inbox_pg.post(payload, AUTH).status_code == 200


def test_a_database_failure_is_503_and_records_nothing(inbox_pg: Inbox, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = open_store(get_settings().resolved_database_url, get_settings())
    payload = webhook(alert("A", "abc", "2026-11-29T10:00:00Z"), alert("B", "def", "2026-11-29T10:00:00Z"))
    # The second row of the payload fails: the first is rolled back with it.
    monkeypatch.setenv("RUNTIME_OPS_FAILPOINTS", "alerts.record=raise")
    response = inbox_pg.post(payload, AUTH)
    assert response.status_code == 503 and "FailpointError" in response.json()["error"]
    assert inbox_pg.alerts() == []
    monkeypatch.delenv("RUNTIME_OPS_FAILPOINTS")
    # The table is gone (a real database error): 503, so Alertmanager retries.
    with store.tx() as conn:
        conn.execute(text("ALTER TABLE alerts RENAME TO alerts_away"))
    try:
        response = inbox_pg.post(payload, AUTH)
        assert response.status_code == 503 and "not recorded" in response.json()["error"]
    finally:
        with store.tx() as conn:
            conn.execute(text("ALTER TABLE alerts_away RENAME TO alerts"))
    assert inbox_pg.alerts() == []
    assert inbox_pg.post(payload, AUTH).json()["new"] == 2  # Alertmanager's retry lands whole


def test_alerts_table_matches_its_migration(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings())
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "alerts" in repr(d)] == []


# ---------------------------------------------------------------------------------------------- the sensor's rules
@pytest.fixture
def sqlite_flow(env, tmp_path, open_inbox) -> Iterator[tuple[Any, Flow, Inbox, Path]]:  # type: ignore[no-untyped-def]
    rules = write_rules(
        tmp_path,
        "  - name: drift\n    match: {alertname: CorpusDrift}\n    action: retrain\n    cooldown: 1h\n"
        "  - name: stale\n    match: {alertname: EmbeddingsStale}\n    action: reembed\n    batch_label: batch\n"
        "  - name: quality\n    match: {alertname: Quality}\n    action: rollback\n    preapproved: true\n"
        "  - name: info\n    match_re: {severity: info|none}\n    action: notify\n",
    )
    env(RUNTIME_OPS_ALERT_RULES=str(rules), RUNTIME_OPS_ALERT_OPEN="true")
    with dg.instance_for_test() as instance:
        yield open_store(get_settings().resolved_database_url, get_settings()), Flow(instance), open_inbox(), rules


def test_the_sensor_applies_the_rules(sqlite_flow) -> None:  # type: ignore[no-untyped-def]
    _, flow, inbox, _ = sqlite_flow
    inbox.post(
        webhook(
            alert("CorpusDrift", "d1", "2026-11-29T10:00:00Z"),
            alert("CorpusDrift", "d2", "2026-11-29T10:00:01Z", region="eu"),  # cooldown of rule drift
            alert("EmbeddingsStale", "e1", "2026-11-29T10:00:00Z"),  # no `batch` label
            alert("EmbeddingsStale", "e2", "2026-11-29T10:00:00Z", batch="no-such-batch"),
            alert("Quality", "q1", "2026-11-29T10:00:00Z"),  # nothing in production to roll back
            alert("DiskFull", "n1", "2026-11-29T10:00:00Z", severity="info"),
            alert("Unknown", "u1", "2026-11-29T10:00:00Z"),
            alert("Gone", "g1", "2026-11-29T09:00:00Z", status="resolved", ends_at="2026-11-29T09:01:00Z"),
        )
    )
    [request] = flow.tick("alert_sensor")
    assert request.job_name == "demo__train_job" and request.run_key == "alert-d1-20261129T100000.000000Z"
    assert request.tags["runtime_ops/alert_rule"] == "drift"
    assert request.tags["dagster/retry_on_asset_or_op_failure"] == "false"
    got = {r["fingerprint"]: (r["action_status"], r["action_detail"]) for r in inbox.alerts()}
    assert got["d1"][0] == "requested"
    assert got["d2"][0] == "suppressed" and "cooling down" in got["d2"][1]
    assert got["e1"][0] == "error" and "label 'batch'" in got["e1"][1]
    assert got["e2"][0] == "error" and "no-such-batch" in got["e2"][1]
    assert got["q1"][0] == "error" and "no production model" in got["q1"][1]
    assert got["n1"][0] == "notified"
    assert got["u1"][0] == "no_rule"
    assert got["g1"][0] == "skipped"
    # The tick that requested d1 died before the daemon saw it: the next tick requests it again, same key.
    flow.launched_keys.clear()
    [again] = flow.tick("alert_sensor")
    assert again.run_key == request.run_key


def test_a_broken_rule_file_fails_the_tick_naming_the_line(sqlite_flow) -> None:  # type: ignore[no-untyped-def]
    _, flow, inbox, rules = sqlite_flow
    inbox.post(webhook(alert("CorpusDrift", "d1", "2026-11-29T10:00:00Z")))
    rules.write_text("version: 1\nrules:\n  - name: drift\n    action: retrian\n")
    with pytest.raises(Exception, match=r"rules\.yaml:4: rule 1 \('drift'\): action"):
        flow.tick("alert_sensor")
    assert inbox.alerts()[0]["action_status"] is None  # nothing was decided with a broken file
