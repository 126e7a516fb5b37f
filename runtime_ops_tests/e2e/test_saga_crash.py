"""SIGKILL of the promotion run's worker inside each step of the promotion saga, on the topology (PostgreSQL,
dagster-daemon, a gRPC code server): the run is marked failed, Dagster's run retries relaunch it (a gated job is
retried after its worker died, never after a step failed), the retry re-verifies the approval and resumes the
saga from its journal. Production ends on the approved version, moved once, announced once; no person acts.

The worker is held inside the step by a `once:` failpoint (only the first worker to get there pauses; the retry
passes) and killed from outside while it waits there. Each case prints `recovery: ...` from the kill to the
saga done.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate
from runtime_ops_tests.support.recovery_report import report_recovery
from runtime_ops_tests.support.topology import wait_for

pytestmark = pytest.mark.slow(seconds=180)  # alone on 2 cores (Dec 2026): started first, see conftest.py

APPROVAL_TAG = "runtime_ops/approval_id"
# Saga step -> its failpoint, and the steps the journal shows done while the worker waits there.
STEPS = {
    "move_production_alias": ("promotion.alias", []),
    "swap_retrieval_index": ("promotion.index", ["move_production_alias"]),
    "announce": ("promotion.announce", ["move_production_alias", "swap_retrieval_index"]),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_sigkill_inside_each_promotion_saga_step_is_resumed_by_a_retry(
    step: str, env: Any, postgres_url: str, topology: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failpoint, done_before = STEPS[step]
    markers = tmp_path / "failpoints"
    markers.mkdir()
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), **NEEDS_A_HUMAN)
    # Only the deployment's processes carry the failpoint (this process promotes v1 itself, below).
    topo = topology(RUNTIME_OPS_FAILPOINTS=f"{failpoint}=once:sleep:120", RUNTIME_OPS_FAILPOINT_DIR=str(markers))
    topo.start_code_server(wait=False)
    store, pending, _ = pending_candidate(landing, topo.instance)
    rid = pending["id"]
    topo.wait_code_server()
    topo.set_sensors(running={"demo__approvals_sensor"})
    topo.start_daemon()

    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    wait_for(lambda: (markers / failpoint).exists(), 180, f"the promotion run's worker inside {step}")
    [run] = topo.instance.get_runs(dg.RunsFilter(tags={APPROVAL_TAG: rid}))
    saga = store.sagas.load_saga(f"promote-{rid}")
    assert saga["status"] == "running"
    assert [s["name"] for s in saga["steps"] if s["status"] == "done"] == done_before
    killed = time.monotonic()
    topo.kill_worker(run.run_id)

    failed = topo.wait_for_run(run.run_id, timeout=120)
    assert failed.status.value == "FAILURE"
    final = topo.final_run(run.run_id, timeout=300)
    recovered = time.monotonic() - killed
    assert final.status.value == "SUCCESS" and final.run_id != run.run_id, topo.log_tails()
    assert final.tags.get("dagster/parent_run_id") == run.run_id  # a run retry, not a new decision

    assert store.registry.alias("production") == 2
    assert [h["new_target"] for h in store.registry.alias_history("production")] == [1, 2]
    moves = [h for h in store.registry.alias_history("retrieval_index") if h["approval_id"] == rid]
    assert len(moves) == 1 and store.indexes.current_index()["model_version"] == 2
    assert store.sagas.load_saga(f"promote-{rid}")["status"] == "done"
    assert len([r for r in store.audit_log.records(rid) if r["event"] == "promoted"]) == 1
    assert store.audit_log.verify().ok
    topo.assert_running()
    report_recovery(capsys, f"SIGKILL of the promotion worker inside saga step {step}", recovered)
