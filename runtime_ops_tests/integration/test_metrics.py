"""GET /metrics on real storage: durable series under concurrent writers, the numbers after real Dagster runs
(compared with Dagster's own run and event records), lock waits on Redis and the state store, and a scrape that
survives a failing source."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from runtime_ops.api.app import create_app
from runtime_ops.demo import CORPUS_DIR
from runtime_ops.locks import LockTimeout, LockUnavailable
from runtime_ops.locks.factory import locker_for
from runtime_ops.observability import metric_writes
from runtime_ops.observability.collector import RuntimeOpsCollector, metrics_registry
from runtime_ops.observability.exposition import parse_metrics
from runtime_ops.observability.metrics import METRIC_NAMES, METRICS
from runtime_ops.settings import get_settings
from runtime_ops.store import NewObject, open_store
from runtime_ops.store.operations import series
from runtime_ops.store.operations.series import bucket_counts
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow, land_files

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
STEP_TYPES = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
DAGSTER_FAMILIES = {
    "runtime_ops_step_success_total",
    "runtime_ops_step_failure_total",
    "runtime_ops_runs_total",
    "runtime_ops_queue_latency_seconds",
    "runtime_ops_run_duration_seconds",
}


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _series(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def _read_headers(client: TestClient) -> dict[str, str]:
    """A `read` key of the app's own state store, made once per app."""
    app: Any = client.app
    if not hasattr(app.state, "test_read_key"):
        app.state.test_read_key = app.state.store.api_keys.create("metrics-test", ["read"]).key
    return {"Authorization": f"Bearer {app.state.test_read_key}"}


def _scrape_http(client: TestClient) -> Samples:
    response = client.get("/metrics", headers=_read_headers(client))
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    return parse_metrics(response.text)


def _scrape(collector: RuntimeOpsCollector) -> Samples:
    return parse_metrics(generate_latest(metrics_registry(collector)).decode())


def _family_names(samples: Samples) -> set[str]:
    out = set()
    for name, _ in samples:
        for suffix in ("_bucket", "_count", "_sum"):
            if name.endswith(suffix) and name[: -len(suffix)] in METRICS:
                name = name[: -len(suffix)]
        out.add(name)
    return out


# ------------------------------------------------------------------------------------ durable concurrent writes
@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_concurrent_writers_lose_no_observation(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else f"sqlite:///{tmp_path}/state.db"
    store = open_store(url, get_settings())
    threads, per_thread = 8, 40
    rng = random.Random(11)
    values = [[rng.expovariate(4) for _ in range(per_thread)] for _ in range(threads)]
    labels = {"lock": "promotion", "outcome": "acquired"}
    start = threading.Barrier(threads)
    failures: list[str] = []

    def work(i: int) -> None:
        start.wait()
        for v in values[i]:
            # Alternate the two series so transactions interleave on both rows.
            if not metric_writes.observe(store.metrics, "runtime_ops_lock_wait_seconds", v, labels):
                failures.append("observe")
            if not metric_writes.inc(store.metrics, "runtime_ops_metrics_write_errors_total", {"metric": "probe"}):
                failures.append("inc")

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert failures == []
    rows = {(r["name"], r["labels"]): r for r in store.metrics.metric_rows()}
    hist = rows[("runtime_ops_lock_wait_seconds", series.canonical_labels(labels))]
    flat = [v for vs in values for v in vs]
    assert hist["count"] == threads * per_thread
    assert hist["sum"] == pytest.approx(sum(flat))
    assert hist["buckets"] == bucket_counts(METRICS["runtime_ops_lock_wait_seconds"].buckets, flat)
    counter = rows[("runtime_ops_metrics_write_errors_total", '{"metric":"probe"}')]
    assert counter["sum"] == threads * per_thread


# ------------------------------------------------------------------------------------ Dagster-derived figures
@dg.op
def fine() -> int:
    return 1


@dg.op
def broken(x: int) -> int:
    raise RuntimeError(f"broken on purpose ({x})")


@dg.job
def metrics_probe() -> None:
    broken(fine())


@pytest.mark.parametrize("storage", ["postgres", "sqlite"])
def test_step_and_run_figures_follow_the_event_log_incrementally(
    storage: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """PostgreSQL: one event log, read after a storage-id cursor. SQLite: a log per run, read per run."""
    (tmp_path / "dh").mkdir()
    with (
        dg.instance_for_test(temp_dir=str(tmp_path / "dh"))
        if storage == "sqlite"
        else _fixture_cm(request, "dagster_instance") as instance
    ):
        assert instance.event_log_storage.is_run_sharded is (storage == "sqlite")
        collector = RuntimeOpsCollector(open_store(f"sqlite:///{tmp_path}/state.db", get_settings()), lambda: instance)
        before = _scrape(collector)
        assert _get(before, "runtime_ops_dagster_instance_up") == 1.0
        assert _series(before, "runtime_ops_step_success_total") == {}

        for n in (1, 3):
            while len(instance.get_run_records()) < n:
                # The first run carries no pipeline tag; the others belong to pipeline alpha.
                tags = {"runtime_ops/pipeline": "alpha"} if instance.get_run_records() else None
                assert not metrics_probe.execute_in_process(instance=instance, raise_on_error=False, tags=tags).success
            s = _scrape(collector)
            for pipeline, runs in (("none", 1), ("alpha", n - 1)):
                job = {"pipeline": pipeline, "job": "metrics_probe"}
                assert _get(s, "runtime_ops_step_success_total", **job, step="fine") == runs
                assert _get(s, "runtime_ops_step_failure_total", **job, step="broken") == runs
                assert _get(s, "runtime_ops_runs_total", **job, status="failure") == runs
                assert _get(s, "runtime_ops_queue_latency_seconds_count", **job) == runs
                assert _get(s, "runtime_ops_run_duration_seconds_count", **job, status="failure") == runs
        # Scraping again counts nothing twice; a new collector (another API process) starts from the history.
        assert _scrape(collector) == s
        fresh = _scrape(
            RuntimeOpsCollector(open_store(f"sqlite:///{tmp_path}/state.db", get_settings()), lambda: instance)
        )
        assert {k: v for k, v in fresh.items() if _family_names({k: v}) & DAGSTER_FAMILIES} == {
            k: v for k, v in s.items() if _family_names({k: v}) & DAGSTER_FAMILIES
        }


class _fixture_cm:
    """A pytest fixture value used as a context manager (so both parametrisations read alike)."""

    def __init__(self, request: pytest.FixtureRequest, name: str) -> None:
        self.value = request.getfixturevalue(name)

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: object) -> None:
        return None


def _expected_from_dagster(instance: dg.DagsterInstance) -> dict[str, Counter[tuple[str | None, ...]]]:
    """What /metrics must say, computed directly from Dagster's run records and each run's event records."""
    out: dict[str, Counter[tuple[str | None, ...]]] = {
        k: Counter() for k in ("ok", "fail", "runs", "queued", "duration")
    }
    terminal = {"SUCCESS": "success", "FAILURE": "failure", "CANCELED": "canceled"}
    for rec in instance.get_run_records():
        run = rec.dagster_run
        p = run.tags.get("runtime_ops/pipeline", "none")
        for r in instance.get_records_for_run(run.run_id, of_type=STEP_TYPES).records:
            event = r.event_log_entry.dagster_event
            key = "ok" if event.event_type == dg.DagsterEventType.STEP_SUCCESS else "fail"
            out[key][(p, run.job_name, r.event_log_entry.step_key)] += 1
        if rec.start_time is not None:
            out["queued"][(p, run.job_name)] += 1
        if run.status.value in terminal:
            status = terminal[run.status.value]
            out["runs"][(p, run.job_name, status)] += 1
            if rec.start_time is not None and rec.end_time is not None:
                out["duration"][(p, run.job_name, status)] += 1
    return out


def _assert_dagster_matches(
    samples: Samples, instance: dg.DagsterInstance
) -> dict[str, Counter[tuple[str | None, ...]]]:
    expected = _expected_from_dagster(instance)

    def keyed(name: str, labels: tuple[str, ...]) -> Counter[tuple[str, ...]]:
        return Counter({tuple(dict(k)[n] for n in labels): int(v) for k, v in _series(samples, name).items() if v})

    assert keyed("runtime_ops_step_success_total", ("pipeline", "job", "step")) == expected["ok"]
    assert keyed("runtime_ops_step_failure_total", ("pipeline", "job", "step")) == expected["fail"]
    assert keyed("runtime_ops_runs_total", ("pipeline", "job", "status")) == expected["runs"]
    assert keyed("runtime_ops_queue_latency_seconds_count", ("pipeline", "job")) == expected["queued"]
    assert keyed("runtime_ops_run_duration_seconds_count", ("pipeline", "job", "status")) == expected["duration"]
    return expected


def test_metrics_match_the_runs_executed(env, postgres_url, dagster_instance, tmp_path, capsys) -> None:
    landing = tmp_path / "landing"
    # Every candidate after the first needs a person: approvals are decided, escalated and expired below.
    env(
        database_url=postgres_url,
        landing=str(landing),
        **NEEDS_A_HUMAN,
    )
    flow = Flow(dagster_instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    files = sorted(p for p in CORPUS_DIR.rglob("*") if p.is_file())
    # Each later batch grows the corpus past the retrain policy's 20% (a smaller one is served, not retrained on).
    first, second, third = files[::2], files[1::2][:6], files[1::2][6:]

    land_files(first, landing)
    (landing / "bad").mkdir()
    (landing / "bad" / "empty.txt").write_bytes(b"")
    (landing / "bad" / "nul.txt").write_bytes(b"text\x00with a NUL byte")
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success  # the first model is approved by policy (decided at creation)
    land_files(second, landing)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train2] = flow.tick_and_run("corpus_sensor")
    assert train2.success  # waits for a person: not a failure
    bypass = flow.materialize(["production_model"])  # a real step failure: the asset refuses to promote
    assert not bypass.success
    [pending] = store.requests.list_requests(status="pending")
    assert store.deadlines.escalate_due(datetime.now(UTC) + timedelta(hours=5)) == [pending["id"]]
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0
    capsys.readouterr()
    [promotion] = flow.tick_and_run("approvals_sensor")
    assert promotion.success

    client = TestClient(create_app(get_settings(), dagster_instance=dagster_instance))
    # The search families are this process's own: one query through the API makes them appear.
    key = store.api_keys.create("metrics-test", ["search"]).key
    searched = client.post("/api/search", json={"query": "json", "k": 3}, headers={"Authorization": f"Bearer {key}"})
    assert searched.status_code == 200, searched.text
    s = _scrape_http(client)
    # Only contract names (plus the metrics' own health) are exposed, and every contract family is there but the
    # backfill gauges, whose series exist only while a backfill fills an index (test_backfill_metrics.py), and the
    # feedback families, whose series start with the first feedback (test_query_log.py), as does production's
    # reference share once it holds enough judgements (test_quality_metrics.py), and the rollout gauges, whose series
    # exist once a pipeline has had a rollout (test_ramp.py).
    backfill = {"runtime_ops_index_shards_planned", "runtime_ops_index_shards_filled"}
    feedback = {
        "runtime_ops_feedback_total",
        "runtime_ops_feedback_click_rank",
        "runtime_ops_quality_reference_helpful_ratio",
    }
    rollout = {name for name in METRIC_NAMES if name.startswith("runtime_ops_rollout_")}
    assert _family_names(s) <= set(METRICS)
    assert set(METRIC_NAMES) - backfill - feedback - rollout <= _family_names(s)
    assert not _family_names(s) & backfill
    expected = _assert_dagster_matches(s, dagster_instance)
    assert expected["fail"][("none", "__ASSET_JOB", "demo__production_model")] == 1
    assert sum(expected["runs"].values()) == len(dagster_instance.get_run_records()) >= 6
    assert _get(s, "runtime_ops_dagster_instance_up") == 1.0

    requests = store.requests.list_requests()
    decided = Counter(r["status"] for r in requests if r["decided_at"] is not None)
    assert decided == {"approved": 2}  # the policy decision and alice's
    for outcome, n in decided.items():
        assert _get(s, "runtime_ops_approval_decision_latency_seconds_count", pipeline="demo", outcome=outcome) == n
    assert (
        _get(s, "runtime_ops_approval_decision_latency_seconds_bucket", pipeline="demo", outcome="approved", le="+Inf")
        == 2
    )
    assert _get(s, "runtime_ops_approvals_pending", pipeline="demo") == 0
    assert _get(s, "runtime_ops_approval_oldest_pending_age_seconds", pipeline="demo") == 0
    assert _get(s, "runtime_ops_approval_escalations_total", pipeline="demo") == 1
    assert _get(s, "runtime_ops_approval_expiries_total", pipeline="demo") == 0

    quarantined = Counter(d["quarantine_code"] for d in store.documents.documents_by_status("quarantined"))
    assert quarantined == {"empty": 1, "binary": 1}
    assert {dict(k)["code"]: v for k, v in _series(s, "runtime_ops_documents_quarantined_total").items()} == quarantined
    recorded = [
        d for b in store.ledger.batches() for d in store.documents.batch_documents(b["id"]) if d["last_modified"]
    ]
    assert (
        _get(s, "runtime_ops_landing_lag_seconds_count", pipeline="demo")
        == len(recorded)
        == len(first) + len(second) + 2
    )
    assert _get(s, "runtime_ops_landing_oldest_pending_age_seconds", pipeline="demo") == 0  # every batch ingested
    # The promotions took their lock (no REDIS_URL here: the state-store locker) and said how long they waited.
    assert sum(_series(s, "runtime_ops_lock_wait_seconds_count").values()) >= 2

    # A third candidate waits, then expires; the same app's next scrape only adds what happened since.
    land_files(third, landing)
    landed = flow.tick("landing_sensor")  # recorded, not yet ingested: the landing age is positive
    s = _scrape_http(client)
    assert _get(s, "runtime_ops_landing_oldest_pending_age_seconds", pipeline="demo") > 0
    for r in landed:
        assert flow.run("landing_sensor", r).success
    [train3] = flow.tick_and_run("corpus_sensor")
    assert train3.success  # waits: not a failure
    s = _scrape_http(client)
    _assert_dagster_matches(s, dagster_instance)
    assert _get(s, "runtime_ops_approvals_pending", pipeline="demo") == 1
    assert _get(s, "runtime_ops_approval_oldest_pending_age_seconds", pipeline="demo") > 0
    assert len(store.deadlines.expire_due(datetime.now(UTC) + timedelta(hours=25))) == 1
    s = _scrape_http(client)
    assert _get(s, "runtime_ops_approval_expiries_total", pipeline="demo") == 1
    assert _get(s, "runtime_ops_approval_decision_latency_seconds_count", pipeline="demo", outcome="expired") == 1
    assert (
        _get(
            s, "runtime_ops_approval_decision_latency_seconds_bucket", pipeline="demo", outcome="expired", le="86400.0"
        )
        == 0
    )
    assert _get(s, "runtime_ops_approvals_pending", pipeline="demo") == 0

    # Another API process (a replica, or a restart) says the same from the history alone; the search families
    # count the queries this process answered, so they are its own.
    other = _scrape_http(TestClient(create_app(get_settings(), dagster_instance=dagster_instance)))
    own = ("runtime_ops_approval_oldest", "runtime_ops_search_")
    assert {k: v for k, v in other.items() if not k[0].startswith(own)} == {
        k: v for k, v in s.items() if not k[0].startswith(own)
    }


# ------------------------------------------------------------------------------------ lock waits
@pytest.mark.parametrize("backend", ["redis", "store"])
def test_lock_wait_is_observed_when_a_second_locker_waits(backend: str, postgres_url: str, redis_url: str) -> None:
    def locker() -> Any:
        return locker_for(redis_url if backend == "redis" else None, postgres_url, get_settings())

    holder, waiter = locker(), locker()
    lease = holder.acquire("promotion", ttl_ms=10_000, wait_s=0)
    threading.Timer(0.6, holder.release, args=[lease]).start()
    t0 = time.monotonic()
    waiter.release(waiter.acquire("promotion", ttl_ms=10_000, wait_s=5))
    waited = time.monotonic() - t0
    assert waited >= 0.6

    lease = holder.acquire("promotion", ttl_ms=10_000, wait_s=0)
    with pytest.raises(LockTimeout):
        waiter.acquire("promotion", ttl_ms=10_000, wait_s=0.3)
    holder.release(lease)
    if backend == "redis":  # nothing listens on port 1: the lock backend is unavailable, the store is not
        with pytest.raises(LockUnavailable):
            locker_for("redis://127.0.0.1:1/0", postgres_url, get_settings()).acquire("promotion", wait_s=0)

    s = _scrape(RuntimeOpsCollector(open_store(postgres_url, get_settings()), lambda: None))
    acquired = {"lock": "promotion", "outcome": "acquired"}
    assert _get(s, "runtime_ops_lock_wait_seconds_count", **acquired) == 3
    assert waited + 0.1 >= _get(s, "runtime_ops_lock_wait_seconds_sum", **acquired) >= 0.6
    # The two uncontended acquisitions are in the small buckets; the waiter's only above 0.5 s.
    assert _get(s, "runtime_ops_lock_wait_seconds_bucket", le="0.5", **acquired) == 2
    assert _get(s, "runtime_ops_lock_wait_seconds_bucket", le="+Inf", **acquired) == 3
    timeout = {"lock": "promotion", "outcome": "timeout"}
    assert _get(s, "runtime_ops_lock_wait_seconds_count", **timeout) == 1
    assert 0.3 <= _get(s, "runtime_ops_lock_wait_seconds_sum", **timeout) < 2.0
    unavailable = {"lock": "promotion", "outcome": "unavailable"}
    assert _get(s, "runtime_ops_lock_wait_seconds_count", **unavailable) == (1 if backend == "redis" else 0)


# ------------------------------------------------------------------------------------ failures
def test_a_failing_source_is_counted_and_the_rest_still_served(env, postgres_url, monkeypatch, caplog) -> None:
    env(database_url=postgres_url)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    app = create_app(get_settings())
    client = TestClient(app)
    s = _scrape_http(client)
    # No Dagster instance configured: its families are left out and the gauge says so; no error.
    assert _get(s, "runtime_ops_dagster_instance_up") == 0
    assert not _family_names(s) & DAGSTER_FAMILIES
    assert _series(s, "runtime_ops_metrics_scrape_errors_total") == {}

    def unreachable() -> Any:
        raise RuntimeError("dagster storage unreachable")

    app.state.metrics_collector.instance_provider = unreachable
    store = app.state.store.scoped("demo")  # the API holds an unscoped store; a batch belongs to a pipeline
    with store.tx() as conn:
        conn.execute(text("DROP TABLE metric_series"))
    response = client.get("/metrics", headers=_read_headers(client))
    assert response.status_code == 200 and "Traceback" not in response.text
    s = parse_metrics(response.text)
    assert _get(s, "runtime_ops_metrics_scrape_errors_total", section="store") == 1
    assert _get(s, "runtime_ops_metrics_scrape_errors_total", section="dagster") == 1
    assert _get(s, "runtime_ops_approvals_pending", pipeline="demo") == 0  # the SQL aggregates were still served
    assert "metrics scrape: store failed" in caplog.text

    # An observation that cannot be written does not fail the work it measured.
    errors_before = series.write_errors().get("runtime_ops_landing_lag_seconds", 0)
    batch = store.ledger.record_batch("s3://b/", [NewObject("k", "v1", 10, datetime.now(UTC) - timedelta(seconds=5))])
    assert batch is not None and store.documents.batch_documents(batch["id"])[0]["key"] == "k"
    assert series.write_errors()["runtime_ops_landing_lag_seconds"] == errors_before + 1
