"""A new model version's embeddings as a Dagster backfill on a real deployment (topology.py: dagster-daemon, a gRPC
code server, the webserver's GraphQL, Dagster storage on PostgreSQL) with the state store and the vector store on
PostgreSQL + pgvector.

The backfill of shadow_embeddings' 4 partitions (`backfill: {shards: 4}` in the test's defs.yaml) is launched as
the UI launches one (GraphQL `launchPartitionBackfill`); the instance's pool limit of 2 at run granularity lets two
partition runs embed at a time. One run's worker is SIGKILLed after it has committed part of its shard: Dagster's
run retry resumes it and embeds only the rest. While a shard is missing the candidate's index is refused (a
promotion would be too); once every partition is done the index is complete, and bringing it up to date embeds
nothing.

The run to kill is held after its first committed page by a `once:` failpoint (the first worker to commit a page
waits there; every other run, and the retry, goes through): the test kills it there, whatever the machine's speed,
and no other run is slowed down.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from bench._synth import make_production, seed_corpus
from runtime_ops.serving.vector_index import IndexIncomplete, ensure_index, incomplete_backfill
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store.corpus.embeddings import Shard
from runtime_ops.vectors.factory import open_vector_store
from runtime_ops_tests.support.fencing import set_fenced
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.topology import process_tree, wait_for

pytestmark = pytest.mark.slow(seconds=90)  # alone on 2 cores (Dec 2026): started first, see conftest.py

SHARDS = 4  # the demo pipeline declares 8; four keep two runs side by side and a queue behind them
CHUNKS = SHARDS * 2600  # three pages of EMBED_BATCH per shard
# The models are trained on a sample of the corpus, as `embedder.train_sample` bounds it: this test is about the
# backfill, not the models' quality, and the whole corpus would take most of its time to train on (twice).
TRAIN_SAMPLE = 2000
FAILPOINT = "embeddings.batch"
ASSET = ["demo", "shadow_embeddings"]
POOLS = """
concurrency:
  pools:
    granularity: run
    default_limit: 2
"""

LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}
"""


def _overlap(records: list[Any]) -> int:
    """The most runs that were executing at the same moment."""
    edges = sorted([(r.start_time, 1) for r in records] + [(r.end_time, -1) for r in records])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_backfill_embeds_a_new_model_two_runs_at_a_time_resumes_a_killed_partition_and_completes_the_index(
    env: Any, pgvector_url: str, topology: Any, tmp_path: Path
) -> None:
    pipelines = tmp_path / "pipelines"
    declare_pipeline(pipelines, "demo", tmp_path / "landing", f"  backfill: {{shards: {SHARDS}}}\n")
    env(database_url=pgvector_url, RUNTIME_OPS_VECTOR_STORE=pgvector_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    seed_corpus(pgvector_url, CHUNKS)
    production = make_production(pgvector_url, seed=1, embed=False, train_sample=TRAIN_SAMPLE)["production_version"]
    candidate = make_production(pgvector_url, seed=2, embed=False, train_sample=TRAIN_SAMPLE)["production_version"]
    store = open_store(pgvector_url, get_settings(), pipeline="demo", migrate=False)
    set_fenced(store, "production", production)
    store.registry.set_alias("candidate", candidate, actor="test")
    vectors = open_vector_store(pgvector_url)

    # The first worker to commit a page waits there (a marker file in `markers` names its pid) until it is killed.
    markers = tmp_path / "failpoints"
    markers.mkdir()
    topo = topology(RUNTIME_OPS_FAILPOINTS=f"{FAILPOINT}=once:sleep:600", RUNTIME_OPS_FAILPOINT_DIR=str(markers))
    with (topo.home / "dagster.yaml").open("a") as f:
        f.write(POOLS)
    # The pool's limit set as an operator does (`dagster instance concurrency set`): a limit that only comes from
    # `default_limit` is created by the daemon's first dequeue of the pool, which does not enforce it yet (Dagster
    # 1.13 reads the configured pools before it initialises the new one), so a first backfill would start them all.
    # It runs while the code server loads; the daemon starts after it.
    limit = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "instance", "concurrency", "set", "runtime_ops_embedding", "2"],
        env=topo.environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    topo.start_code_server()
    topo.set_sensors(running=set())
    topo.start_webserver()
    assert limit.wait(timeout=120) == 0, limit.stdout.read() if limit.stdout else ""

    keys = [Shard(i, SHARDS).key for i in range(SHARDS)]
    params = {"partitionNames": keys, "assetSelection": [{"path": ASSET}], "fromFailure": False}
    launched = topo.graphql(LAUNCH, {"params": params})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill_id = launched["backfillId"]
    # Started after the launch, the daemon's backfill loop (one pass every 30 s) takes the backfill on its first pass.
    topo.start_daemon()

    def backfill_runs() -> list[Any]:
        return topo.instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))

    # The first partition run to commit a page: the one whose worker's process tree holds the marker's pid.
    def holding() -> Any:
        if not (markers / FAILPOINT).exists() or not (pid := (markers / FAILPOINT).read_text()):
            return None
        started = [run for run in backfill_runs() if run.status.value == "STARTED"]
        return next((run for run in started if int(pid) in process_tree(topo.worker_pid(run.run_id))), None)

    victim = wait_for(holding, 240, f"a partition run waiting at {FAILPOINT} after its first page")
    shard = Shard(int(victim.tags["dagster/partition"]), SHARDS)
    topo.kill_worker(victim.run_id)
    counts = store.embeddings.embedding_counts(candidate, shard=shard)
    shard_chunks, kept = counts["current_chunks"], counts["embedded"]
    assert 0 < kept < shard_chunks

    # Not complete, so not promotable: the refusal names the missing partitions, the killed one among them.
    why = incomplete_backfill(store.indexes, vectors, candidate)
    assert why is not None and shard.key in why.split("(partitions ")[1]
    try:
        ensure_index(store, vectors, candidate)
        raise AssertionError("an index with shards missing was completed")
    except IndexIncomplete as exc:
        assert "of shadow_embeddings" in str(exc)

    # Dagster's run retry (a worker that died, not a step that failed) resumes the killed partition.
    failed = topo.wait_for_run(victim.run_id, timeout=120)
    assert failed.status.value == "FAILURE"
    resumed = topo.final_run(victim.run_id, timeout=600)  # its retry queues behind the partitions not yet run
    assert resumed.status.value == "SUCCESS" and resumed.tags.get("dagster/parent_run_id") == victim.run_id

    def all_materialized() -> bool:
        done = topo.instance.get_materialized_partitions(dg.AssetKey(ASSET))
        return set(done) == set(keys)

    wait_for(all_materialized, 300, "every partition of shadow_embeddings materialized")
    wait_for(lambda: all(r.status.value in ("SUCCESS", "FAILURE") for r in backfill_runs()), 60, "runs to end")

    # The resumed run embedded only what the killed one had not committed.
    [event] = [
        e
        for e in topo.instance.all_logs(resumed.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        if e.dagster_event is not None
    ]
    meta = event.dagster_event.event_specific_data.materialization.metadata
    assert meta["embedded_now"].value == shard_chunks - kept
    assert meta["indexed"].value == shard_chunks

    # Two partition runs embedded side by side, never more than the pool's limit.
    records = [topo.instance.get_run_record_by_id(r.run_id) for r in backfill_runs()]
    assert _overlap([r for r in records if r.start_time and r.end_time]) == 2

    # Complete: ready, every chunk once, the candidate promotable with nothing left to embed.
    row = store.indexes.index_for(candidate, vectors.kind, vectors.describe())
    assert row is not None and row["status"] == "ready" and row["n_chunks"] == CHUNKS
    assert store.embeddings.embedding_counts(candidate) == {"current_chunks": CHUNKS, "embedded": CHUNKS}
    assert incomplete_backfill(store.indexes, vectors, candidate) is None
    state = ensure_index(store, vectors, candidate)
    assert not state.filled and state.embedded == 0 and state.n_chunks == CHUNKS
    backfill = topo.instance.get_backfill(backfill_id)
    took = time.time() - backfill.backfill_timestamp
    print(f"backfill {backfill_id}: {backfill.status.value}, {len(records)} runs, {took:.1f} s")
    topo.assert_running()
