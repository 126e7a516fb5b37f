"""Logs and traces of a real lifecycle: runs on PostgreSQL (state store and Dagster storage), approvals through
a local Slack Web API server and a signed link on a real uvicorn ops API, with secrets planted in every secret
setting. Every runtime_ops log line must parse as JSON with its fields, no planted secret or link token may
appear in any captured output, and the in-memory span exporter must show the run ids and the approval link."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from runtime_ops.demo import CORPUS_DIR
from runtime_ops.observability import logs, tracing
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.flow import Flow, land_files
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.slack_signing import interaction_body, sign

PLANTED = {
    "SLACK_BOT_TOKEN": "xoxb-planted-bot-7f3a9c1e5b2d4f6a8c0e",
    "SLACK_SIGNING_SECRET": "planted-signing-secret-4e8b2c6d0f1a3e5c",
    "RUNTIME_OPS_LINK_SECRET": "planted-link-secret-9d1f3b5e7a0c2e4g",
    "RUNTIME_OPS_MODEL_API_KEY": "sk-planted-model-key-2b4d6f8a0c1e3g5i",
    "RUNTIME_OPS_WEBHOOK_SECRET": "planted-webhook-secret-6a8c0e2g4i1k3m",
    "RUNTIME_OPS_ALERT_TOKEN": "planted-alert-token-8c0e2g4i6k1m3o5q",
    "RUNTIME_OPS_AUDIT_KEY": "planted-audit-key-3f5h7j9l1n3p5r7t",
}
DB_PASSWORD = "planted-db-password-1q3s5u7w9y"
CHANNEL = "C0APPROVALS"


class _Records(logging.Handler):
    """Keeps every record that reaches the runtime_ops logger and the root logger, as handlers see them."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        out = []
        for r in self.records:
            out.append(r.getMessage())
            out.append(json.dumps(logs.extra_fields(r), default=str))
            out.append(r.exc_text or "")
        return "\n".join(out)


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = tracing.install_memory_exporter()
    yield exporter
    exporter.clear()


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_lifecycle_logs_are_json_without_secrets_and_traces_link_the_approval(
    env, postgres_url, dagster_instance, tmp_path, capfd, spans
) -> None:
    landing = tmp_path / "landing"
    api_port = free_port()
    db_url = postgres_url.replace("postgresql://postgres@", f"postgresql://postgres:{DB_PASSWORD}@")
    with SlackServer(token=PLANTED["SLACK_BOT_TOKEN"]) as slack:
        env(
            database_url=db_url,
            landing=str(landing),
            RUNTIME_OPS_AUTO_APPROVE_MARGIN="1.0",
            RUNTIME_OPS_MAX_REGRESSION="1.0",
            SLACK_APPROVAL_CHANNEL=CHANNEL,
            SLACK_API_URL=slack.base_url,
            SLACK_HOOKS_URL=slack.url,  # the local server's response_url endpoints
            RUNTIME_OPS_APPROVERS="U2,U3",
            RUNTIME_OPS_REQUIRED_APPROVALS="2",
            RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{api_port}",
            RUNTIME_OPS_LOG_FORMAT="json",
            **PLANTED,
        )
        settings = get_settings()
        logs.configure_logging(root=True)  # as `runtime-ops serve` / the CLI do
        records = _Records()
        for name in ("runtime_ops", ""):
            logging.getLogger(name).addHandler(records)
        try:
            flow = Flow(dagster_instance)
            store = open_store(settings.resolved_database_url, get_settings())
            files = sorted(p for p in CORPUS_DIR.rglob("*") if p.is_file())
            land_files(files[::2], landing)
            [ingest1] = flow.tick_and_run("landing_sensor")
            [train1] = flow.tick_and_run("corpus_sensor")
            assert ingest1.success and train1.success
            land_files(files[1::2], landing)
            [ingest2] = flow.tick_and_run("landing_sensor")
            [train2] = flow.tick_and_run("corpus_sensor")
            assert ingest2.success and train2.success  # waits for two people: not a failure
            [pending] = store.requests.list_requests(status="pending")
            assert pending["trace_context"], "the gate stores the request span's traceparent"

            # Something careless in runtime_ops code: secrets in the message, its args and an extra field.
            logging.getLogger("runtime_ops.test").warning(
                "debugging %s with %s",
                PLANTED["SLACK_BOT_TOKEN"],
                {"secret": PLANTED["SLACK_SIGNING_SECRET"]},
                extra={"config": {"key": PLANTED["RUNTIME_OPS_MODEL_API_KEY"], "db": db_url}},
            )

            with ApiServer(settings, port=api_port, serve_logging=True) as api:
                assert flow.tick("approvals_sensor") == []  # announces: Slack message + personal links
                links = {e["user"]: e["text"] for e in slack.ephemerals}
                link = re.search(r"https?://\S+/approvals/[A-Za-z0-9_.\-]+", links["U2"]).group(0)
                token = link.rsplit("/", 1)[1]
                assert web.get(link, timeout=10).status_code == 200
                assert web.post(link, data={"action": "approve"}, timeout=10).status_code == 200
                [post] = slack.calls_to("chat.postMessage")
                body = interaction_body(
                    pending["id"],
                    "approve",
                    "U3",
                    message_ts=post.response_json["ts"],
                    action_ts="1700000000.000001",
                    channel_id=CHANNEL,
                    response_url=slack.response_url("click"),
                )
                headers = {
                    "content-type": "application/x-www-form-urlencoded",
                    **sign(PLANTED["SLACK_SIGNING_SECRET"], body, int(time.time())),
                }
                assert web.post(f"{api.url}/slack/interactions", content=body, headers=headers).status_code == 200
                assert store.requests.get_request(pending["id"])["status"] == "approved"
                slack.wait_for_calls("chat.update", 1)
            [promotion_request] = flow.tick("approvals_sensor")
            promotion = flow.run("approvals_sensor", promotion_request)
            assert promotion.success
        finally:
            for name in ("runtime_ops", ""):
                logging.getLogger(name).removeHandler(records)
            logs.configure_logging()  # back to the Dagster-process setup for the tests that follow

    out, err = capfd.readouterr()
    runs = {"ingest1": ingest1, "train1": train1, "ingest2": ingest2, "train2": train2, "promotion": promotion}
    run_ids = {r.run_id for r in runs.values()}

    # -- every runtime_ops log line is JSON with its fields
    for line in (out + err).splitlines():
        if any(rid in line for rid in run_ids) or '"logger": "runtime_ops' in line:
            assert line.startswith("{"), f"not a JSON log line: {line[:200]}"
    lines = _json_lines(err)
    by_run: dict[str, list[dict[str, Any]]] = {rid: [] for rid in run_ids}
    for doc in lines:
        assert {"ts", "level", "logger", "message"} <= set(doc)
        if doc.get("run_id") in by_run:
            by_run[doc["run_id"]].append(doc)
    for name, run in runs.items():
        docs = by_run[run.run_id]
        assert docs, f"no JSON lines for {name}"
        assert all(d["job"] == run.dagster_run.job_name for d in docs)
        finished = [d for d in docs if d.get("status") == "succeeded" and d.get("event") == "STEP_SUCCESS"]
        assert finished and all(d["duration_ms"] >= 0 and d["step"] for d in finished), name
        ours = [d for d in docs if d.get("status") in ("started", "succeeded") and "event" not in d]
        assert ours and all(d.get("asset") and d.get("trace_id") and d.get("span_id") for d in ours), name
    assert any(d.get("batch_id") and d.get("asset") == "demo/raw_documents" for d in by_run[ingest2.run_id])
    # The gate's failed check is a status too (Dagster's ASSET_CHECK_EVALUATION event).
    assert any(d.get("status") == "check_failed" for d in by_run[train2.run_id])
    assert all(d.get("approval_id") == pending["id"] for d in by_run[promotion.run_id])
    api_lines = [d for d in lines if d["logger"] == "uvicorn.access"]
    assert any("/approvals/[REDACTED]" in d["message"] for d in api_lines), "the access log was captured, redacted"
    careless = [d for d in lines if d["logger"] == "runtime_ops.test"]
    assert careless and "[REDACTED]" in careless[0]["message"] and "[REDACTED]" in json.dumps(careless[0]["config"])

    # -- no planted secret or link token anywhere
    event_log = "\n".join(
        f"{e.message} {e.dagster_event!r}"
        for r in dagster_instance.get_runs()
        for e in dagster_instance.all_logs(r.run_id)
    )
    captured = {"stdout": out, "stderr": err, "log records": records.text(), "Dagster event log": event_log}
    assert len(records.records) > 10 and len(event_log) > 1000
    for where, text in captured.items():
        for name, value in [*PLANTED.items(), ("database password", DB_PASSWORD), ("link token", token)]:
            assert value not in text, f"{name} appears in {where}"

    # -- traces: step spans carry the run id (as trace id too); decisions and the promotion link to the request
    finished_spans = spans.get_finished_spans()
    steps = [s for s in finished_spans if s.name.startswith("step ")]
    for name, run in runs.items():
        mine = [s for s in steps if s.attributes.get("dagster.run_id") == run.run_id]
        assert mine, f"no step span for {name}"
        assert all(format(s.context.trace_id, "032x") == run.run_id.replace("-", "") for s in mine)
        assert all(s.attributes["dagster.job"] == run.dagster_run.job_name for s in mine)
        assert all(s.attributes["dagster.step_key"] for s in mine)
    [request_span] = [
        s
        for s in finished_spans
        if s.name == "approval.request"
        and s.attributes.get("approval.id") == pending["id"]
        and s.attributes["approval.created"]  # the promotion run's human_approval check finds it again
    ]
    decisions = [s for s in finished_spans if s.name == "approval.decision"]
    assert {s.attributes["approval.channel"] for s in decisions} == {"link", "slack"}
    for decision in decisions:
        assert decision.attributes["approval.id"] == pending["id"]
        assert decision.attributes["approval.outcome"] in ("recorded", "accepted")
        assert decision.attributes["approval.wait_seconds"] >= 0
        [link] = decision.links
        assert (link.context.trace_id, link.context.span_id) == (
            request_span.context.trace_id,
            request_span.context.span_id,
        )
    promotion_steps = [s for s in steps if s.attributes["dagster.run_id"] == promotion.run_id]
    assert promotion_steps and all(
        [(lk.context.trace_id, lk.context.span_id) for lk in s.links]
        == [(request_span.context.trace_id, request_span.context.span_id)]
        for s in promotion_steps
    )
    slack_spans = [s for s in finished_spans if s.name.startswith("slack ")]
    assert {"slack chat.postMessage", "slack chat.postEphemeral", "slack chat.update"} <= {s.name for s in slack_spans}
    assert all(s.attributes["http.status_code"] == 200 and s.kind.name == "CLIENT" for s in slack_spans)
    assert all(PLANTED["SLACK_BOT_TOKEN"] not in json.dumps(dict(s.attributes)) for s in finished_spans)
