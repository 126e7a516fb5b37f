"""The deployment topology as local processes, driven from outside like an operator and Slack would.

PostgreSQL (Dagster storage + state store), moto's S3, a local Slack Web API server, and as separate
processes: `dagster api grpc` (the code location), `dagster-daemon run` (sensors, run queue, monitoring),
`dagster-webserver` (UI + GraphQL) and `runtime-ops serve` (ops API). Production v1 is set up first; then:

1. a new half of the corpus is put into S3 - the daemon's landing sensor ingests it, the corpus sensor
   trains a candidate, the gate opens an approval request and the approvals sensor posts it to Slack;
2. a click signed exactly as Slack signs it reaches the ops API and approves;
3. the approvals sensor launches the promotion run, which moves `production` to v2;
4. the ops API's /metrics and the webserver's GraphQL agree on what ran.

The end-to-end latencies are printed (pytest -s or the captured output of a failure).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime_ops.demo import CORPUS_DIR
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.slack_signing import interaction_body, sign
from runtime_ops_tests.support.topology import Topology, wait_for

pytestmark = pytest.mark.slow(seconds=88)  # alone on 2 cores (Dec 2026): started first, see conftest.py

SECRET = "e2e-signing-secret-0123456789abcdef"
CHANNEL = "C0E2E"
TOKEN = "xoxb-e2e-token"
PREFIX = "landing/"

RUNS_QUERY = """
query {
  runsOrError(limit: 1000) {
    __typename
    ... on Runs { results { runId jobName status stepStats { stepKey status } } }
  }
}
"""


def put_tree(client: Any, bucket: str, folder: Path) -> int:
    """Upload `folder` under the landing prefix with the keys the golden set names (relative to the corpus)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        key = PREFIX + path.relative_to(CORPUS_DIR).as_posix()
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return len(files)


def scrape(url: str, headers: dict[str, str]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    resp = web.get(f"{url}/metrics", headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def by_labels(samples: dict, name: str, *keys: str) -> Counter:
    out: Counter = Counter()
    for (sample, labels), value in samples.items():
        if sample == name and value:
            d = dict(labels)
            out[tuple(d[k] for k in keys)] += int(value)
    return out


def test_s3_to_slack_approval_to_promotion_across_processes(
    env, postgres_url, aws_env, s3_bucket, topology, tmp_path, capsys
) -> None:
    client, bucket = s3_bucket
    with SlackServer(token=TOKEN, channels={CHANNEL}) as slack:
        api_port = free_port()
        env(
            database_url=postgres_url,
            landing=f"s3://{bucket}/{PREFIX}",
            AWS_ENDPOINT_URL=aws_env.endpoint_url,  # env() starts from a clean slate
            **NEEDS_A_HUMAN,  # every candidate after the first needs a human
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_APPROVAL_CHANNEL=CHANNEL,
            SLACK_API_URL=slack.base_url,
            SLACK_HOOKS_URL=slack.url,  # the local server's response_url endpoints
            RUNTIME_OPS_APPROVERS="U2",
            RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{api_port}",
        )
        topo: Topology = topology()  # after env(): the processes inherit these settings
        topo.start_code_server(wait=False)

        # Production v1, set up in this process (the deployment's storage, not its processes).
        store = open_store(get_settings().resolved_database_url, get_settings())
        flow = Flow(topo.instance)
        put_tree(client, bucket, CORPUS_DIR / "stdlib" / "data")
        assert all(r.success for r in flow.tick_and_run("landing_sensor"))
        [train] = flow.tick_and_run("corpus_sensor")
        assert train.success and store.registry.alias("production") == 1

        topo.wait_code_server()
        topo.set_sensors(running={"demo__landing_sensor", "demo__corpus_sensor", "demo__approvals_sensor"})
        topo.start_daemon()
        topo.start_webserver()
        topo.start_ops_api(port=api_port)
        ingested_before = len(store.ledger.batches(status="ingested"))

        # 1. A file put into S3 is ingested by the daemon's sensor, and becomes a candidate waiting for Slack.
        t0 = time.monotonic()
        n_new = put_tree(client, bucket, CORPUS_DIR / "stdlib" / "text")
        wait_for(lambda: len(store.ledger.batches(status="ingested")) > ingested_before, 180,
                 "the new objects ingested by the daemon")  # fmt: skip
        t_ingested = time.monotonic() - t0
        pending = wait_for(lambda: store.requests.list_requests(status="pending"), 240, "an approval request")[0]
        t_requested = time.monotonic() - t0
        assert pending["candidate_version"] == 2
        posted = lambda: [c for c in slack.calls_to("chat.postMessage") if c.response_json.get("ok")]  # noqa: E731
        post = wait_for(posted, 60, "the request posted to Slack")[0]
        t_posted = time.monotonic() - t0

        # 2. A signed click from Slack approves through the ops API process.
        body = interaction_body(
            pending["id"], "approve", "U2", message_ts=post.response["ts"], action_ts="1700000000.000001",
            channel_id=CHANNEL, response_url=slack.response_url("e2e-click"),
        )  # fmt: skip
        headers = {"content-type": "application/x-www-form-urlencoded", **sign(SECRET, body, int(time.time()))}
        t_click = time.monotonic()
        resp = web.post(f"{topo.ops_url}/slack/interactions", content=body, headers=headers, timeout=10)
        t_ack = time.monotonic() - t_click
        assert resp.status_code == 200, resp.text
        assert store.requests.get_request(pending["id"])["status"] == "approved"

        # 3. The daemon's approvals sensor launches the promotion run; production moves to v2.
        wait_for(lambda: store.registry.alias("production") == 2, 180, "production on v2")
        t_promoted = time.monotonic() - t_click
        request = wait_for(
            lambda: (r := store.requests.get_request(pending["id"]))["promotion_run_id"] and r,
            60,
            "the promotion run recorded",
        )
        promotion = topo.wait_for_run(request["promotion_run_id"])
        assert promotion.status.value == "SUCCESS", topo.log_tails()
        assert [h["new_target"] for h in store.registry.alias_history("production")] == [1, 2]
        wait_for(lambda: slack.calls_to("chat.update"), 30, "the Slack message updated with the decision")

        # 4. /metrics (ops API process, a `read` key as Prometheus sends it) and GraphQL (webserver) agree.
        read = {"Authorization": f"Bearer {store.api_keys.create('prometheus', ['read']).key}"}

        def finished() -> list[dict[str, Any]] | None:
            data = topo.graphql(RUNS_QUERY)["runsOrError"]
            assert data["__typename"] == "Runs", data
            runs = data["results"]
            return runs if runs and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs) else None

        runs = wait_for(finished, 120, "every run finished")
        runs_by_job = Counter((r["jobName"], r["status"].lower()) for r in runs)
        steps = [(r["jobName"], s["stepKey"], s["status"]) for r in runs for s in r["stepStats"]]
        steps_ok = Counter((job, step) for job, step, status in steps if status == "SUCCESS")
        steps_failed = Counter((job, step) for job, step, status in steps if status == "FAILURE")

        def agree() -> dict | None:
            samples = scrape(topo.ops_url, read)
            got = (
                by_labels(samples, "runtime_ops_runs_total", "job", "status"),
                by_labels(samples, "runtime_ops_step_success_total", "job", "step"),
                by_labels(samples, "runtime_ops_step_failure_total", "job", "step"),
            )
            return samples if got == (runs_by_job, steps_ok, steps_failed) else None

        try:
            samples = wait_for(agree, 30, "/metrics agreeing with GraphQL")
        except TimeoutError:
            samples = scrape(topo.ops_url, read)
            assert by_labels(samples, "runtime_ops_runs_total", "job", "status") == runs_by_job
            assert by_labels(samples, "runtime_ops_step_success_total", "job", "step") == steps_ok
            assert by_labels(samples, "runtime_ops_step_failure_total", "job", "step") == steps_failed
            raise
        # What the run list says in numbers: an ingest and a train run each side, one promotion, and no failure:
        # the train run whose candidate waited for the Slack click succeeded (waiting is not failing).
        assert runs_by_job[("demo__promotion_job", "success")] == 1
        assert runs_by_job[("demo__train_job", "success")] == 2
        assert not [k for k in runs_by_job if k[1] == "failure"] and not steps_failed, (runs_by_job, steps_failed)
        # One ingest run per landing batch: an upload that spans a sensor tick is two batches, never a run twice.
        batches = len(store.ledger.batches(status="ingested"))
        assert sum(n for (job, _), n in runs_by_job.items() if job == "demo__ingest_job") == batches >= 2
        decided = {dict(labels).get("outcome"): v for (name, labels), v in samples.items()
                   if name == "runtime_ops_approval_decision_latency_seconds_count"}  # fmt: skip
        assert decided == {"approved": 2}, decided  # v1 by policy (first model), v2 by the Slack click
        queue_count = sum(v for (name, _), v in samples.items() if name == "runtime_ops_queue_latency_seconds_count")
        assert queue_count == len(runs)
        # What a soak prints when a loop is stuck: every thread's stack of both, and neither stops for it.
        stacks = topo.dump_stacks()
        for name in ("daemon", "code_server"):
            part = stacks.split(f"--- stacks of {name} ")[1].split("--- stacks of ")[0]
            assert "(most recent call first)" in part and 'File "' in part, stacks[-2000:]
        topo.assert_running()

    with capsys.disabled():
        print(
            "\n[topology] end-to-end latencies (2 cores, local processes):"
            f"\n  {n_new} objects put into S3 -> ingested by the daemon's sensor : {t_ingested:6.1f} s"
            f"\n  put -> candidate trained, approval request open        : {t_requested:6.1f} s"
            f"\n  put -> request posted to Slack                          : {t_posted:6.1f} s"
            f"\n  signed Slack click -> acknowledged by the ops API       : {t_ack * 1000:6.0f} ms"
            f"\n  signed Slack click -> production moved by the promotion : {t_promoted:6.1f} s"
            f"\n  runs seen by GraphQL and /metrics alike                 : {len(runs)}"
        )
