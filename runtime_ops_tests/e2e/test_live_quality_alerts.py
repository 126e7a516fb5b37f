"""Live quality monitoring closed end to end, with the real binaries: users of the real ops API judge production
v2's results not helpful; Debian's Prometheus server scrapes /metrics with a read key and evaluates the real
`docker/prometheus/rules.yml` (its durations divided by FACTOR: `support/prometheus.py`), `RetrievalQualityRegressed`
fires to the real Alertmanager, which posts it to `/alerts/alertmanager`; the alert sensor, under the shipped
`alerts/rules.example.yaml` (pre-approved here), launches the rollback run, and production and the serving index go
back to v1. Each hop is asserted where it is visible: Prometheus' /api/v1/alerts, the inbox row, the run, the
aliases, and what /api/search serves afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from runtime_ops.alerts.rules import EXAMPLE_RULES
from runtime_ops.settings import get_settings
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, serving_v2
from runtime_ops_tests.support.prometheus import PrometheusServer, scaled_rules
from runtime_ops_tests.support.served import served_from
from runtime_ops_tests.support.topology import wait_for

pytestmark = pytest.mark.slow(seconds=75)  # alone on 2 cores under load (Dec 2026): ~40 s of it is v1 -> v2

RULES = Path(__file__).resolve().parents[2] / "docker" / "prometheus" / "rules.yml"
# 30m windows -> 7.5s, the day before them -> 6 min (360s, of which this test fills the first seconds), for: 10m
# -> 2.5s. Counts are not durations: the rule still wants >= 30 judgements now and >= 100 in the baseline.
FACTOR = 240
QUALITY = "RetrievalQualityRegressed"
QUERIES = ("read a csv file", "parse json text", "format a date", "split a string", "sort a list", "open a file")


class Users:
    """Applications of the ops API: search (a `search` key), then judge what they were shown."""

    def __init__(self, api: ApiServer) -> None:
        self.client = httpx.Client(base_url=api.url, timeout=10)
        self.headers = api.key_headers("search")
        self.asked = 0

    def search(self) -> dict[str, Any]:
        query = QUERIES[self.asked % len(QUERIES)]
        self.asked += 1
        reply = self.client.post("/api/search", json={"query": query, "k": 5}, headers=self.headers)
        assert reply.status_code == 200, reply.text
        return reply.json()

    def judge(self, answer: dict[str, Any], signals: list[str]) -> None:
        """One judgement per shown result, in rank order; a 409 (the query log has not flushed the request yet)
        is retried, as its Retry-After says an application should."""
        assert len(answer["results"]) >= len(signals)
        for result, signal in zip(answer["results"], signals, strict=False):
            body = {"request_id": answer["request_id"], "chunk_id": result["chunk_id"], "signal": signal}

            def accepted(body: dict[str, Any] = body) -> bool:
                reply = self.client.post("/api/feedback", json=body, headers=self.headers)
                assert reply.status_code in (201, 409), reply.text  # recorded, or not flushed yet
                return reply.status_code == 201

            wait_for(accepted, 10, f"feedback on {answer['request_id']}", interval=0.05)

    def close(self) -> None:
        self.client.close()


def _judged(prom: PrometheusServer, signal: str) -> float:
    found = prom.query(f'sum(runtime_ops_feedback_total{{pipeline="demo",arm="production",signal="{signal}"}})')
    return float(found[0]["value"][1]) if found else 0.0


def _quality(prom: PrometheusServer, state: str) -> list[dict[str, Any]]:
    return [a for a in prom.alerts() if a["labels"]["alertname"] == QUALITY and a["state"] == state]


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    return wait_for(check, timeout, what, interval=0.25)


def test_helpful_share_drop_fires_through_prometheus_and_alertmanager_and_rolls_production_back(
    env, postgres_url, redis_url, dagster_instance, tmp_path, alertmanager, prometheus
) -> None:  # type: ignore[no-untyped-def]
    token = "am-webhook-secret"
    shipped = yaml.safe_load(EXAMPLE_RULES.read_text())
    [quality_rule] = [r for r in shipped["rules"] if QUALITY in r.get("match_re", {}).get("alertname", "").split("|")]
    assert quality_rule["action"] == "rollback" and quality_rule["preapproved"] is False
    quality_rule["preapproved"] = True  # the shipped file asks a person first; this chain runs unattended
    sensor_rules = tmp_path / "alert_rules.yaml"
    sensor_rules.write_text(yaml.safe_dump(shipped, sort_keys=False))
    landing = tmp_path / "landing"
    env(
        database_url=postgres_url,
        landing=str(landing),
        REDIS_URL=redis_url,
        RUNTIME_OPS_ALERT_RULES=str(sensor_rules),
        RUNTIME_OPS_ALERT_TOKEN=token,
        RUNTIME_OPS_QUERY_LOG_FLUSH_S="0.2",
        **NEEDS_A_HUMAN,
    )
    store, flow = serving_v2(landing, dagster_instance)
    index_v2 = store.indexes.current_index()
    assert index_v2["model_version"] == 2

    fast_rules = tmp_path / "rules.yml"
    fast_rules.write_text(scaled_rules(RULES.read_text(), FACTOR))
    with ApiServer(get_settings()) as api:
        am = alertmanager(f"{api.url}/alerts/alertmanager", bearer_token=token)
        read_key = api.key_headers("read")["Authorization"].removeprefix("Bearer ")
        prom = prometheus(
            target=f"127.0.0.1:{api.port}", bearer_key=read_key, rules=fast_rules, alertmanager=f"127.0.0.1:{am.port}"
        )
        users = Users(api)
        try:
            _until(lambda: [t for t in prom.targets() if t["health"] == "up"], 20, "Prometheus scraping /metrics")

            # Both signals' series exist before the baseline traffic (a counter's first scraped value is not an
            # increase): one helpful and one not_helpful judgement, scraped.
            users.judge(users.search(), ["helpful", "not_helpful"])
            _until(lambda: _judged(prom, "helpful") and _judged(prom, "not_helpful"), 20, "the first judgements")

            # The baseline: 24 requests, 4 of each 5 results helpful.
            for _ in range(24):
                users.judge(users.search(), ["helpful"] * 4 + ["not_helpful"])
            _until(lambda: _judged(prom, "helpful") == 97, 20, "the baseline's judgements scraped")
            assert _quality(prom, "pending") == [] and _quality(prom, "firing") == []

            # v2 disappoints: every result not helpful, 10 judgements per poll, until Prometheus fires (and on until
            # the alert reaches the inbox: a firing notification that came only after the window emptied again
            # would arrive resolved).
            def disappoint() -> None:
                users.judge(users.search(), ["not_helpful"] * 5)
                users.judge(users.search(), ["not_helpful"] * 5)

            def firing() -> list[dict[str, Any]]:
                disappoint()
                return _quality(prom, "firing")

            [fired] = _until(firing, 60, f"{QUALITY} firing in Prometheus")
            assert fired["labels"] == {"alertname": QUALITY, "pipeline": "demo", "severity": "critical"}
            assert float(fired["value"]) < 0.2  # this window's helpful share
            # The recorded baseline (by now it holds the first not_helpful judgements too) is above this window.
            [baseline] = prom.query('pipeline:runtime_ops_feedback_helpful_ratio:1d_offset30m{pipeline="demo"}')
            assert float(baseline["value"][1]) > float(fired["value"]) + 0.2

            # Alertmanager -> the inbox, authenticated with the webhook token.
            def inbox() -> list[dict[str, Any]]:
                return [a for a in store.alerts.list_alerts() if a["alertname"] == QUALITY]

            def arrived() -> list[dict[str, Any]]:
                disappoint()
                return inbox()

            [entry] = _until(arrived, 30, "the alert in the inbox")
        finally:
            users.close()
        assert entry["status"] == "firing" and entry["receiver"] == "runtime-ops"
        assert entry["labels"]["pipeline"] == "demo" and entry["labels"]["severity"] == "critical"
        assert [a["labels"]["pipeline"] for a in am.alerts() if a["labels"]["alertname"] == QUALITY] == ["demo"]

        # The alert sensor: the shipped rule, one rollback run v2 -> v1.
        requests = flow.tick("alert_sensor")
        [rollback] = [r for r in requests if r.tags.get("runtime_ops/alertname") == QUALITY]
        assert rollback.job_name == "demo__rollback_job"
        assert rollback.tags["runtime_ops/alert_rule"] == "retrieval-quality-regressed"
        config = rollback.run_config["ops"]["demo__rollback_production"]["config"]
        assert (config["from_version"], config["to_version"]) == (2, 1)
        result = flow.run("alert_sensor", rollback)
        assert result.success

        assert store.registry.alias("production") == 1
        last = store.registry.alias_history("production")[-1]
        assert (last["old_target"], last["new_target"], last["actor"]) == (2, 1, "rollback:preapproved")
        index_v1 = store.indexes.current_index()
        assert index_v1["model_version"] == 1 and index_v1["id"] != index_v2["id"]
        flow.tick("alert_sensor")  # records the run's outcome on the alert
        [done] = inbox()
        assert (done["action_status"], done["run_id"], done["rule"]) == (
            "succeeded",
            result.run_id,
            "retrieval-quality-regressed",
        )

        # What applications get follows: the next searches are served by v1's index.
        users = Users(api)
        try:
            _until(lambda: served_from(store, users.search()["request_id"])[0] == 1, 20, "searches served by v1")
            answer = users.search()
            assert served_from(store, answer["request_id"]) == (1, index_v1["id"])
            assert store.query_log.get(answer["request_id"]).record["arm"] == "production"  # type: ignore[union-attr]
        finally:
            users.close()
