"""SIGKILL of every process of `runtime-ops dev` (a power loss, an out-of-memory kill) during `ingest_job`,
during `train_job` and during the serving automation run, each followed by a plain restart: the flow reaches a
promoted, indexed, answering state with no person acting, every document once, each version promoted once.

The default launcher cannot tell Dagster's run monitoring that a worker died: `runtime-ops dev` and
run_recovery_sensor mark such runs failed (recovery/orphans.py) and run retries relaunch them. Each phase prints
`recovery: <phase>: X.Y s`, from the restart to the interrupted work being complete.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.storage.tags import AUTOMATION_CONDITION_TAG

from runtime_ops.demo import corpus_keys, land_corpus
from runtime_ops.landing import LocalLandingSource
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.dev_process import Dev
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN
from runtime_ops_tests.support.recovery_report import report_recovery
from runtime_ops_tests.support.served import served_from
from runtime_ops_tests.support.topology import wait_for

pytestmark = pytest.mark.slow(seconds=228)  # alone on 2 cores (Dec 2026): started first, see conftest.py

EMBEDDINGS = dg.AssetKey(["demo", "document_embeddings"])
ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def _mid_run(instance: dg.DagsterInstance, match: Callable[[dg.DagsterRun], bool], what: str) -> str:
    """The id of a STARTED run `match`es once one of its steps has started."""

    def found() -> str | None:
        for record in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
            run = record.dagster_run
            if (
                match(run)
                and instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_START, limit=1).records
            ):
                return run.run_id
        return None

    return wait_for(found, 600, what, interval=0.3)


def _finished_group(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun | None:
    """The successful run of `run_id`'s retry group, once there is one."""
    group = instance.get_run_group(run_id)
    runs = group[1] if group else []
    done = [r for r in runs if r.status == dg.DagsterRunStatus.SUCCESS]
    return done[0] if done else None


def _report(capsys: pytest.CaptureFixture[str], phase: str, seconds: float) -> None:
    report_recovery(capsys, phase, seconds)


def _serving(store: Any) -> bool:
    """Production is set and the serving index is its model's, with no change of the corpus left to apply."""
    production = store.registry.alias("production")
    index = store.indexes.current_index()
    return (
        production is not None
        and index is not None
        and int(index["model_version"]) == production
        and store.changes.pending(int(index["synced_seq"])) == 0
        and not store.ledger.batches(status="pending")
        and not store.ledger.batches(status="launched")
    )


def test_sigkill_of_dev_during_each_run_kind_then_restart_finishes_with_no_person(
    env: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "landing"
    # The first model is approved by policy whatever the margin (nothing to beat); the second waits for a person,
    # so the rest of the corpus is served by a declarative automation run (phase 3) rather than, when the second
    # candidate happens to clear the margin, by the train run that promotes it.
    home = env(landing=str(landing), **NEEDS_A_HUMAN)
    dev = Dev(home, tmp_path)
    try:
        # 1. During ingest_job: `dev` seeds 70% of the demo corpus; each document's parse is slowed so the kill
        #    lands inside the run.
        dev.start(failpoints="documents.parse=sleep:0.3")
        instance = dev.instance()
        ingest = _mid_run(instance, lambda r: r.job_name == "demo__ingest_job", "an ingest_job run mid-way")
        dev.kill()
        assert instance.get_run_by_id(ingest).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]
        get_settings.cache_clear()
        store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="demo")
        [batch] = store.ledger.batches()
        assert batch["status"] != "ingested"

        # Restarted, with embedding batches slowed so that the kill during train_job lands inside it.
        restarted = dev.start(failpoints="embeddings.batch=sleep:1")
        # The batch is finished by a retry of the interrupted run.
        wait_for(
            lambda: store.ledger.get_batch(batch["id"])["status"] == "ingested" and _finished_group(instance, ingest),
            600,
            "the batch ingested by a retry of its run",
        )
        _report(capsys, "SIGKILL of runtime-ops dev during ingest_job", time.monotonic() - restarted)
        assert instance.get_run_by_id(ingest).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]

        # 2. During train_job (the first model: trained, gated by policy, promoted, indexed in one run).
        train = _mid_run(instance, lambda r: r.job_name == "demo__train_job", "a train_job run mid-way")
        dev.kill()
        assert instance.get_run_by_id(train).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]
        restarted = dev.start(failpoints="embeddings.batch=sleep:1")
        wait_for(
            lambda: _serving(store) and _finished_group(instance, train),
            900,
            "production v1 promoted and indexed by a retry of train_job",
            interval=1,
        )
        _report(capsys, "SIGKILL of runtime-ops dev during train_job", time.monotonic() - restarted)

        # 3. During the serving automation run that follows the rest of the corpus.
        land_corpus(LocalLandingSource(landing), only_missing=True)
        serving = _mid_run(
            instance,
            lambda r: r.tags.get(AUTOMATION_CONDITION_TAG) == "true" and EMBEDDINGS in (r.asset_selection or ()),
            "a serving automation run mid-way",
        )
        dev.kill()
        assert instance.get_run_by_id(serving).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]
        restarted = dev.start()

        def settled() -> bool:
            idle = not instance.get_run_records(dg.RunsFilter(statuses=ACTIVE), limit=1)
            return idle and _serving(store) and _finished_group(instance, serving) is not None

        wait_for(settled, 900, "the rest of the corpus ingested, served and idle", interval=1)
        _report(capsys, "SIGKILL of runtime-ops dev during the serving automation run", time.monotonic() - restarted)

        # Every document once, each version promoted once, the index holding every current chunk once.
        keys = store.documents.current_keys_between(None, None, source=str(landing))
        assert len(keys) == len(set(keys))
        quarantined = store.documents.document_counts().get("quarantined", 0)
        assert len(keys) + quarantined == len(corpus_keys())
        promoted = Counter(e["detail"]["version"] for e in store.audit_log.records() if e["event"] == "promoted")
        assert promoted and all(n == 1 for n in promoted.values()), promoted
        index = store.indexes.current_index()
        assert int(index["n_chunks"]) == store.documents.current_chunk_count()
        # ... and answering: the ops API that `dev` runs serves a query from that index.
        key = store.api_keys.create("crash-test", ["search"]).key
        wait_for(lambda: web.get(f"{dev.api}/healthz", timeout=5).status_code == 200, 60, "the ops API")
        found = web.post(
            f"{dev.api}/api/search",
            json={"query": "json encoder", "k": 3},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert found.status_code == 200, found.text
        body = found.json()
        assert served_from(store, body["request_id"])[1] == index["id"] and len(body["results"]) == 3
    except BaseException:
        print(dev.tail())
        raise
    finally:
        dev.stop()
