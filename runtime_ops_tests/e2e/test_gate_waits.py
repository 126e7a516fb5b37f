"""Waiting for a person is a state, not a failure; a refusal is one run, whoever launched it.

- Train runs whose candidate waits for approval succeed: /metrics counts no failed step or run for them, and the
  shipped alert rules (docker/prometheus/rules.yml, evaluated by promtool over those very numbers) stay quiet.
- `production_model` materialized from the Dagster UI (the webserver's GraphQL launch, as its Materialize button
  sends it) while a candidate waits is one failed run with a one-line reason, and the daemon does not retry it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from prometheus_client import generate_latest

from runtime_ops.observability.collector import RuntimeOpsCollector, metrics_registry
from runtime_ops.observability.exposition import parse_metrics
from runtime_ops.settings import get_settings
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate
from runtime_ops_tests.support.servers import require_binary
from runtime_ops_tests.support.topology import wait_for

PROMETHEUS = Path(__file__).resolve().parents[2] / "docker" / "prometheus"
FAMILIES = ("runtime_ops_step_failure_total", "runtime_ops_step_success_total", "runtime_ops_runs_total")
QUIET_ALERTS = ("RuntimeOpsStepFailureRateHigh", "RuntimeOpsRunsFailing")


def _series(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> list[dict[str, str]]:
    """The scraped counters as promtool input: zero for 5 minutes, then the scraped value for an hour."""
    out = []
    for (name, labels), value in sorted(samples.items(), key=lambda kv: (kv[0][0], sorted(kv[0][1]))):
        if name not in FAMILIES:
            continue
        rendered = ",".join(f'{k}="{v}"' for k, v in sorted(labels))
        out.append({"series": f"{name}{{{rendered}}}", "values": f"0x5 {value:g}x60"})
    return out


def _promtool_quiet(tmp_path: Path, series: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    tests = {
        "rule_files": [str(PROMETHEUS / "rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": at, "alertname": alert, "exp_alerts": []}
                    for alert in QUIET_ALERTS
                    for at in ("15m", "30m", "60m")
                ],
            }
        ],
    }
    path = tmp_path / "pending_test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    promtool = require_binary("promtool", "prometheus")
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)


def test_a_pending_approval_leaves_failure_metrics_and_alerts_quiet(
    env, postgres_url: str, dagster_instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), **NEEDS_A_HUMAN)
    store, pending, flow = pending_candidate(landing, dagster_instance)
    # Two more train runs while the same candidate waits (a schedule, a teammate's Launchpad click): the gate
    # finds the same request each time.
    train = flow.repo.get_job("demo__train_job")
    for _ in range(2):
        again = train.execute_in_process(instance=dagster_instance, raise_on_error=False)
        assert again.success
    assert [r["id"] for r in store.requests.list_requests(status="pending")] == [pending["id"]]

    collector = RuntimeOpsCollector(store, lambda: dagster_instance)
    samples = parse_metrics(generate_latest(metrics_registry(collector)).decode())
    runs = {dict(labels)["status"]: v for (name, labels), v in samples.items()
            if name == "runtime_ops_runs_total" and dict(labels)["job"] == "demo__train_job"}  # fmt: skip
    assert runs == {"success": 4.0}, runs  # v1 (auto-approved) and three runs of the waiting v2
    failures = {labels: v for (name, labels), v in samples.items() if name == "runtime_ops_step_failure_total"}
    assert not any(failures.values()), failures
    checks = {dict(labels)["step"]: v for (name, labels), v in samples.items()
              if name == "runtime_ops_step_success_total" and dict(labels)["job"] == "demo__train_job"}  # fmt: skip
    assert checks["demo__evaluation_report_human_approval"] == 4.0, checks

    series = _series(samples)
    assert any("demo__train_job" in s["series"] for s in series)
    result = _promtool_quiet(tmp_path, series)
    assert result.returncode == 0, result.stdout + result.stderr

    # The same rules do fire when those train runs fail: the quiet above is the numbers', not the rules'.
    failing = [
        {"series": s["series"].replace('status="success"', 'status="failure"'), "values": s["values"]}
        if "runtime_ops_runs_total" in s["series"] and "demo__train_job" in s["series"]
        else s
        for s in series
    ]
    loud = _promtool_quiet(tmp_path, failing)
    assert loud.returncode != 0 and "RuntimeOpsRunsFailing" in loud.stdout + loud.stderr, loud.stdout


LAUNCH = """
mutation Materialize($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


def _materialize_from_the_ui(topo: Any, asset: list[str]) -> str:
    """What the UI's Materialize button sends for one asset: a launch of the implicit asset job."""
    params = {
        "mode": "default",
        "runConfigData": {},
        "executionMetadata": {"tags": []},
        "selector": {
            "repositoryLocationName": "runtime_ops",
            "repositoryName": "__repository__",
            "pipelineName": "__ASSET_JOB",
            "assetSelection": [{"path": asset}],
            "assetCheckSelection": [],
        },
    }
    launched = topo.graphql(LAUNCH, {"executionParams": params})["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def test_production_model_from_the_ui_while_a_candidate_waits_is_one_refused_run(
    env, postgres_url: str, topology, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), **NEEDS_A_HUMAN)
    topo = topology()
    topo.start_code_server(wait=False)
    store, pending, _ = pending_candidate(landing, topo.instance)
    topo.wait_code_server()
    topo.set_sensors(running=set())  # nothing but this launch: the daemon only dequeues and retries runs
    topo.start_daemon()
    topo.start_webserver()

    run_id = _materialize_from_the_ui(topo, ["demo", "production_model"])
    run = topo.wait_for_run(run_id, timeout=120)
    assert run.status.value == "FAILURE", topo.log_tails()
    [failure] = [e for e in topo.events(run_id) if e.dagster_event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.dagster_event.step_failure_data.error
    reason = error.message.strip()
    assert "\n" not in reason and "refusing to promote" in reason and pending["id"] in reason, reason
    assert error.cls_name == "Failure" and not error.cause

    # Dagster decides about a retry when the run fails and records it on the run; none follows.
    decided = wait_for(lambda: topo.run(run_id).tags.get("dagster/will_retry"), 30, "the retry decision")
    assert decided.lower() == "false"
    topo.wait_retry_handled(run_id)  # the daemon's retry loop has read the failure, and launched nothing
    assert topo.retries_of(run_id) == []
    asset_runs = topo.instance.get_runs(dg.RunsFilter(job_name="__ASSET_JOB"))
    assert [r.run_id for r in asset_runs] == [run_id]
    assert store.registry.alias("production") == 1
    assert get_settings().resolved_database_url == postgres_url
