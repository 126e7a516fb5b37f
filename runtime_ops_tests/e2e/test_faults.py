"""Fault injection on a real topology: PostgreSQL, Redis, a gRPC code server and dagster-daemon (topology.py).

Each scenario prints `recovery: <scenario>: X.Y s`, the time from the fault to the system being correct again.
Done elsewhere: a SIGSTOPped lock holder (test_locks.py) and a crash in the middle of the saga
(test_promotion_saga.py).

Runs launched here by the test use the in-process executor (run config): on two cores each step process of the
multiprocess executor is a fresh interpreter costing ~4 s, which would dominate every recovery time; the kill
then hits exactly the process that embeds. Runs launched by the code location's own sensors keep its default
(multiprocess) executor.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from runtime_ops.demo import CORPUS_DIR
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow, pending_candidate
from runtime_ops_tests.support.recovery_report import report_recovery
from runtime_ops_tests.support.topology import REPO_ROOT, Topology, wait_for

pytestmark = pytest.mark.slow(seconds=199)  # alone on 2 cores (Dec 2026): started first, see conftest.py

IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
# Each committed batch of 256 embeddings pauses in the deployment's processes (not in this one), so a fault
# lands between two batches of a run rather than after it.
SLOW_EMBEDDING = "embeddings.batch=sleep:0.4"
APPROVAL_TAG = "runtime_ops/approval_id"

WORDS = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega", "vector",
    "matrix", "tensor", "queue", "stream", "batch", "shard", "replica", "leader", "follower", "quorum", "ledger",
    "journal", "cursor", "window", "buffer", "socket", "packet", "kernel", "thread", "lock", "fence", "token",
    "lease", "retry", "backoff", "jitter", "saga", "index", "corpus", "chunk", "model", "version", "alias", "gate",
]  # fmt: skip


def report(capsys: pytest.CaptureFixture[str], scenario: str, seconds: float) -> None:
    """Print the recovery time (and list it in `make test`'s summary)."""
    report_recovery(capsys, scenario, seconds)


def write_bulk(landing: Path, n_files: int, chars: int, seed: int = 0, folder: str = "bulk") -> list[str]:
    """Synthetic plain-text documents (paragraphs of random-word sentences): many chunks, cheap to parse."""
    rng = random.Random(seed)
    out = landing / folder
    out.mkdir(parents=True, exist_ok=True)
    keys = []
    for i in range(n_files):
        paragraphs: list[str] = []
        size = 0
        while size < chars:
            sentences = [" ".join(rng.choices(WORDS, k=rng.randint(8, 16))).capitalize() + "." for _ in range(5)]
            paragraphs.append(" ".join(sentences))
            size += len(paragraphs[-1]) + 2
        path = out / f"doc{seed:02d}_{i:03d}.txt"
        path.write_text("\n\n".join(paragraphs))
        keys.append(path.relative_to(landing).as_posix())
    return keys


def embedding_integrity(store: Any, version: int) -> dict[str, int]:
    """(chunk, model version) pairs stored more than once, and current chunks without exactly one vector."""
    with store.engine.connect() as conn:
        duplicated = conn.execute(
            text(
                "SELECT count(*) FROM (SELECT chunk_id, model_version FROM chunk_embeddings "
                "GROUP BY chunk_id, model_version HAVING count(*) > 1) d"
            )
        ).scalar()
        not_one = conn.execute(
            text(
                "SELECT count(*) FROM (SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
                "LEFT JOIN chunk_embeddings e ON e.chunk_id = c.id AND e.model_version = :v "
                "WHERE d.status = 'ok' GROUP BY c.id HAVING count(e.chunk_id) <> 1) x"
            ),
            {"v": version},
        ).scalar()
    return {"duplicated": int(duplicated or 0), "not_exactly_one": int(not_one or 0)}


def registry(store: Any) -> dict[str, Any]:
    return {name: store.registry.alias(name) for name in ("production", "retrieval_index", "candidate")}


def promoted_records(store: Any, request_id: str) -> list[dict[str, Any]]:
    return [r for r in store.audit_log.records(request_id) if r["event"] == "promoted"]


def production_with_backlog(env, postgres_url, topology, tmp_path):  # type: ignore[no-untyped-def]
    """Production model v1 serving the demo corpus, then ~1,900 new chunks it has not embedded yet; a running
    code server and daemon (sensors stopped: only the test launches runs)."""
    landing = tmp_path / "landing"
    shutil.copytree(CORPUS_DIR, landing)
    # The production retry waits: a step's retries are what bridge a database restart.
    env(database_url=postgres_url, landing=str(landing), RUNTIME_OPS_RETRY_DELAY="2s")
    topo = topology(RUNTIME_OPS_FAILPOINTS=SLOW_EMBEDDING)
    topo.start_code_server(wait=False)  # loads while the setup below runs in this process

    flow = Flow(topo.instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success and store.registry.alias("production") == 1
    write_bulk(landing, n_files=30, chars=50_000)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    before = store.embeddings.embedding_counts(1)
    assert before["current_chunks"] - before["embedded"] > 4 * 256, before

    topo.wait_code_server()
    topo.set_sensors(running=set())
    topo.start_daemon()
    return topo, store, before


def launch_embedding_run(topo: Topology, store: Any, before: dict[str, int]) -> str:
    """index_job through the run queue; returns once its worker has committed a first batch."""
    run_id = topo.launch("demo__index_job", run_config=IN_PROCESS)
    topo.wait_for_run(run_id, ("STARTED",), timeout=60)
    wait_for(
        lambda: store.embeddings.embedding_counts(1)["embedded"] > before["embedded"], 60, "a first committed batch"
    )
    return run_id


def assert_fully_embedded_once(topo: Topology, store: Any, before: dict[str, int]) -> dict[str, int]:
    after = store.embeddings.embedding_counts(1)
    assert after["embedded"] == after["current_chunks"] == before["current_chunks"], after
    assert embedding_integrity(store, 1) == {"duplicated": 0, "not_exactly_one": 0}
    index = store.indexes.current_index()
    assert index["model_version"] == 1 and index["n_chunks"] == after["current_chunks"]
    return after


# ------------------------------------------------------------------------- SIGKILL, then PostgreSQL restart
def test_sigkill_of_the_run_worker_then_a_postgres_restart_during_document_embeddings(
    env, postgres_server, postgres_url, topology, tmp_path, capsys
) -> None:
    """Two faults in turn on one deployment, each during an index_job run embedding a backlog: its worker
    SIGKILLed (Dagster's run retry resumes it), then, on a second backlog, the PostgreSQL server restarted."""
    topo, store, before = production_with_backlog(env, postgres_url, topology, tmp_path)
    run_id = launch_embedding_run(topo, store, before)

    faulted = time.monotonic()
    topo.kill_worker(run_id)
    failed = topo.wait_for_run(run_id, timeout=30)
    detected = time.monotonic() - faulted
    assert failed.status.value == "FAILURE"
    # The code server noticed its child die and failed the run (the default launcher cannot resume it).
    assert any("was terminated by signal 9 (SIGKILL)" in (e.message or "") for e in topo.events(run_id))
    # The worker is gone, so this count is final for the killed run.
    at_kill = store.embeddings.embedding_counts(1)["embedded"]
    assert before["embedded"] < at_kill < before["current_chunks"], "the kill must land between two batches"

    retry = topo.wait_for_retry(run_id, timeout=30)
    assert retry.tags["dagster/parent_run_id"] == run_id
    final = topo.final_run(retry.run_id, timeout=150)
    recovered = time.monotonic() - faulted
    assert final.status.value == "SUCCESS", topo.log_tails()
    assert final.run_id == retry.run_id, "the first retry succeeds"

    after = assert_fully_embedded_once(topo, store, before)
    # The retry embedded exactly the chunks the killed run had not committed: nothing twice, nothing lost.
    [record] = topo.instance.fetch_materializations(dg.AssetKey(["demo", "document_embeddings"]), limit=1).records
    assert record.run_id == final.run_id
    assert record.asset_materialization.metadata["embedded_now"].value == after["current_chunks"] - at_kill
    report(capsys, f"SIGKILL run worker during document_embeddings (FAILED after {detected:.1f} s, retried)", recovered)

    # A second backlog, then the database server restarted under the run embedding it.
    write_bulk(tmp_path / "landing", n_files=30, chars=50_000, seed=1)
    assert all(r.success for r in Flow(topo.instance).tick_and_run("landing_sensor"))
    before = store.embeddings.embedding_counts(1)
    assert before["current_chunks"] - before["embedded"] > 4 * 256, before
    run_id = launch_embedding_run(topo, store, before)

    faulted = time.monotonic()
    postgres_server.stop("immediate")  # as a crash: every connection of every process is cut
    time.sleep(2.0)  # down for a while: the run's next writes meet a refused connection
    postgres_server.start()

    first = topo.wait_for_run(run_id, timeout=120)
    final = topo.final_run(run_id, timeout=150)
    recovered = time.monotonic() - faulted
    assert final.status.value == "SUCCESS", topo.log_tails()
    # Either the run rode it out (store reconnects, step retries) or it failed cleanly and Dagster retried it.
    assert first.status.value == "SUCCESS" or topo.retries_of(run_id), first.status
    assert_fully_embedded_once(topo, store, before)
    topo.assert_running()  # the code server and the daemon rode out the restart
    how = "run finished" if first.status.value == "SUCCESS" else "run failed, retry finished"
    report(capsys, f"PostgreSQL restarted during an index_job run ({how})", recovered)


def gated_env(env, postgres_url, tmp_path, **settings: str) -> Path:  # type: ignore[no-untyped-def]
    """Settings under which every candidate after the first needs a human (the margin cannot be met)."""
    landing = tmp_path / "landing"
    env(
        database_url=postgres_url,
        landing=str(landing),
        **NEEDS_A_HUMAN,
        RUNTIME_OPS_RETRY_DELAY="2s",  # production's: the retries bridge the outages these tests inject
        **settings,
    )
    return landing


def test_postgres_restart_during_an_approval(env, postgres_server, postgres_url, topology, tmp_path, capsys) -> None:
    two_of_two = {"RUNTIME_OPS_APPROVERS": "alice,bob", "RUNTIME_OPS_REQUIRED_APPROVALS": "2"}
    landing = gated_env(env, postgres_url, tmp_path, **two_of_two)
    topo = topology()  # after env(): the deployment's processes inherit these settings
    topo.start_code_server(wait=False)
    store, pending, _ = pending_candidate(landing, topo.instance)
    rid = pending["id"]
    topo.wait_code_server()
    topo.set_sensors(running={"demo__approvals_sensor"})  # the approval becomes a promotion run through the daemon
    topo.start_daemon()

    first = store.votes.cast_vote(rid, actor="alice", approve=True, channel="cli")
    assert first.outcome == "recorded", first.message  # 1 of 2
    # PostgreSQL crashes while bob decides: his attempt fails as a whole, alice's acknowledged vote survives.
    postgres_server.stop("immediate")
    with pytest.raises(OperationalError):
        store.votes.cast_vote(rid, actor="bob", approve=True, channel="cli")
    postgres_server.start()
    assert store.requests.get_request(rid)["status"] == "pending"
    assert [(v["actor"], v["vote"]) for v in store.votes.for_request(rid)] == [("alice", "approve")]
    second = store.votes.cast_vote(rid, actor="bob", approve=True, channel="cli")
    assert second.outcome == "accepted" and store.requests.get_request(rid)["status"] == "approved", second.message

    # ... and crashes again between the decision and the promotion run.
    postgres_server.restart("immediate")
    faulted = time.monotonic()
    wait_for(lambda: store.registry.alias("production") == 2, 150, "production on v2")
    recovered = time.monotonic() - faulted

    [run] = topo.instance.get_runs(dg.RunsFilter(tags={APPROVAL_TAG: rid}))
    assert topo.wait_for_run(run.run_id, timeout=120).status.value == "SUCCESS", topo.log_tails()
    # A later tick of the sensor sees the run and records it instead of launching another.
    wait_for(
        lambda: store.requests.get_request(rid)["promotion_run_id"] == run.run_id, 60, "the request marked launched"
    )
    assert len(topo.instance.get_runs(dg.RunsFilter(tags={APPROVAL_TAG: rid}))) == 1
    request = store.requests.get_request(rid)
    assert request["status"] == "approved"
    assert sorted((v["actor"], v["vote"]) for v in store.votes.for_request(rid)) == [
        ("alice", "approve"),
        ("bob", "approve"),
    ]
    assert [h["new_target"] for h in store.registry.alias_history("production")] == [1, 2]
    assert store.sagas.load_saga(f"promote-{rid}")["status"] == "done"
    assert len(promoted_records(store, rid)) == 1
    assert store.audit_log.verify().ok
    topo.assert_running()
    report(capsys, "PostgreSQL restarted during an approval (decision kept, promoted once)", recovered)


# ------------------------------------------------------------------------------------------------ Redis
def test_redis_down_during_promotion_fails_closed_then_promotes_once(
    env, postgres_url, redis_server, redis_url, dagster_instance, tmp_path, capsys
) -> None:
    store, pending, flow = pending_candidate(
        gated_env(env, postgres_url, tmp_path, REDIS_URL=redis_url), dagster_instance
    )
    rid = pending["id"]
    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    [request] = flow.tick("approvals_sensor")
    before = registry(store)
    history_before = store.registry.alias_history("production")

    outage = 4.0
    seen: dict[str, Any] = {}

    def redis_returns() -> None:
        time.sleep(outage)
        # What the promotion did while Redis was down: nothing (fail closed).
        seen.update(
            registry=registry(store),
            history=store.registry.alias_history("production"),
            saga=store.sagas.load_saga(f"promote-{rid}"),
        )
        redis_server.start()
        seen["back"] = time.monotonic()

    redis_server.stop()
    down = time.monotonic()
    back = threading.Thread(target=redis_returns)
    back.start()
    try:
        result = flow.run("approvals_sensor", request)
    finally:
        back.join()
    done = time.monotonic()

    assert seen["registry"] == before and seen["history"] == history_before and seen["saga"] is None
    assert result.success
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert retries and all(e.step_key == "demo__production_model" for e in retries)
    assert "LockUnavailable" in str(retries[0].step_retry_data.error)
    assert store.registry.alias("production") == 2
    assert [h["new_target"] for h in store.registry.alias_history("production")] == [1, 2]
    index_moves = [h for h in store.registry.alias_history("retrieval_index") if h["approval_id"] == rid]
    assert len(index_moves) == 1 and store.indexes.current_index()["model_version"] == 2
    assert store.sagas.load_saga(f"promote-{rid}")["status"] == "done" and len(promoted_records(store, rid)) == 1
    report(
        capsys,
        f"Redis stopped during promotion ({outage:.0f} s outage, {len(retries)} closed attempts; from Redis back)",
        done - seen["back"],
    )
    assert done - down >= outage


# ------------------------------------------------------------------------------------------------ races
def test_two_landing_sensor_ticks_racing_record_each_object_once(
    env, postgres_url, dagster_instance, tmp_path, capsys
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    env(database_url=postgres_url, landing=str(landing))
    store = open_store(get_settings().resolved_database_url, get_settings())
    # Two evaluations of landing_sensor with their own cursors (two daemons, or a tick overlapping the next);
    # the daemon's run-key dedupe is per (code location, sensor), so they share it.
    first = Flow(dagster_instance)
    second = Flow(dagster_instance, defs=first.defs)
    second.launched_keys = first.launched_keys
    written: list[str] = []
    failed_ticks: list[BaseException] = []
    started = time.monotonic()
    for round_ in range(4):
        written += write_bulk(landing, n_files=25, chars=1500, seed=round_, folder=f"round{round_}")
        barrier = threading.Barrier(2)
        requests: list[dg.RunRequest] = []

        def tick(flow: Flow, barrier: threading.Barrier, requests: list[dg.RunRequest]) -> None:
            barrier.wait()
            try:
                requests.extend(flow.tick("landing_sensor"))
            except Exception as exc:  # recorded so the assertion below can name it
                failed_ticks.append(exc)

        threads = [threading.Thread(target=tick, args=(f, barrier, requests)) for f in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # The next ticks launch whatever a failed tick left (a pending batch is requested again, same run key).
        requests += first.tick("landing_sensor") + second.tick("landing_sensor")
        for request in requests:
            assert first.run("landing_sensor", request).success
    recovered = time.monotonic() - started

    docs = [d for b in store.ledger.batches() for d in store.documents.batch_documents(b["id"])]
    assert sorted(d["key"] for d in docs) == sorted(written), "each object version is in exactly one batch"
    assert all(b["n_objects"] > 0 and b["status"] == "ingested" for b in store.ledger.batches())
    assert all(d["status"] == "ok" for d in docs)
    ingest_runs = dagster_instance.get_runs(dg.RunsFilter(job_name="demo__ingest_job"))
    assert sorted(r.tags["runtime_ops/batch_id"] for r in ingest_runs) == sorted(
        b["id"] for b in store.ledger.batches()
    )
    assert first.tick("landing_sensor") == [] and second.tick("landing_sensor") == []
    assert failed_ticks == []  # the loser of a race on the batch sequence retries its transaction, it never fails
    report(capsys, "two landing_sensor ticks racing, 4 rounds", recovered)


def test_two_promotions_racing_move_production_once(
    env, postgres_url, redis_url, dagster_instance, tmp_path, capsys
) -> None:
    store, pending, _ = pending_candidate(gated_env(env, postgres_url, tmp_path, REDIS_URL=redis_url), dagster_instance)
    rid = pending["id"]
    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    # The winner pauses inside the lock, so the loser certainly arrives while it is held.
    child_env = {**os.environ, "RUNTIME_OPS_FAILPOINTS": "promotion.alias=sleep:1.5"}
    started = time.monotonic()
    command = [sys.executable, "-m", "runtime_ops.cli", "promote", "--approval", rid]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    procs = [subprocess.Popen(command, env=child_env, cwd=REPO_ROOT, **pipes) for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    recovered = time.monotonic() - started
    assert [p.returncode for p in procs] == [0, 0], outputs
    movers = [o for o in outputs if "production: v1 -> v2" in o]
    assert len(movers) == 1, outputs
    assert any("already done: nothing to do" in o for o in outputs), outputs
    assert [h["new_target"] for h in store.registry.alias_history("production")] == [1, 2]
    assert len([h for h in store.registry.alias_history("retrieval_index") if h["approval_id"] == rid]) == 1
    assert store.sagas.load_saga(f"promote-{rid}")["status"] == "done" and len(promoted_records(store, rid)) == 1
    report(capsys, "two promotions racing (one moves production, the other finds the saga done)", recovered)
