"""SIGKILL of the promotion run's worker inside the promotion saga, twice in one promotion, on the topology
(PostgreSQL, dagster-daemon, a gRPC code server): killed inside `move_production_alias`, the run is marked failed
and Dagster's run retries relaunch it (a gated job is retried after its worker died, never after a step failed);
the retry re-verifies the approval, resumes the saga from its journal and is killed in turn inside
`swap_retrieval_index`; the second retry (the last the gated runs' budget of two allows) finishes. Production ends
on the approved version, moved once, announced once; no person acts.

Each worker is held inside its step by a `once:` failpoint (only the first worker to get there pauses; a later one
passes) and killed from outside while it waits there. A crash inside the saga's last step, `announce`, is resumed
in-process by test_promotion_saga (`promote` finishing a saga left mid-way). Each kill prints `recovery: ...` from
the kill to the next worker inside its step, or to the saga done.
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

pytestmark = pytest.mark.slow(seconds=90)  # alone on 2 cores (Dec 2026): started first, see conftest.py

APPROVAL_TAG = "runtime_ops/approval_id"
# Saga step -> its failpoint, and the steps the journal shows done while a worker waits there; in the order the
# promotion's runs reach them (the first run waits in the first, its retry in the second).
STEPS = {
    "move_production_alias": ("promotion.alias", []),
    "swap_retrieval_index": ("promotion.index", ["move_production_alias"]),
}


def test_sigkill_inside_promotion_saga_steps_is_resumed_by_retries(
    env: Any, postgres_url: str, topology: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    markers = tmp_path / "failpoints"
    markers.mkdir()
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), **NEEDS_A_HUMAN)
    # Only the deployment's processes carry the failpoints (this process promotes v1 itself, below).
    failpoints = ",".join(f"{failpoint}=once:sleep:120" for failpoint, _ in STEPS.values())
    topo = topology(RUNTIME_OPS_FAILPOINTS=failpoints, RUNTIME_OPS_FAILPOINT_DIR=str(markers))
    topo.start_code_server(wait=False)
    store, pending, _ = pending_candidate(landing, topo.instance)
    rid = pending["id"]
    topo.wait_code_server()
    topo.set_sensors(running={"demo__approvals_sensor"})
    topo.start_daemon()

    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    run_id = wait_for(
        lambda: next(iter(topo.instance.get_runs(dg.RunsFilter(tags={APPROVAL_TAG: rid}))), None), 120, "the run"
    ).run_id
    killed = None
    for step, (failpoint, done_before) in STEPS.items():
        wait_for(lambda f=failpoint: (markers / f).exists(), 240, f"a promotion worker inside {step}")
        if killed is not None:
            report_recovery(
                capsys, f"SIGKILL of the promotion worker, then its retry inside {step}", time.monotonic() - killed
            )
        holder = _run_inside(topo, rid)
        saga = store.sagas.load_saga(f"promote-{rid}")
        assert saga["status"] == "running"
        assert [s["name"] for s in saga["steps"] if s["status"] == "done"] == done_before
        killed = time.monotonic()
        topo.kill_worker(holder.run_id)
        assert topo.wait_for_run(holder.run_id, timeout=120).status.value == "FAILURE"

    final = topo.final_run(run_id, timeout=300)
    recovered = time.monotonic() - killed  # type: ignore[operator]
    assert final.status.value == "SUCCESS", topo.log_tails()
    runs = topo.instance.get_runs(dg.RunsFilter(tags={APPROVAL_TAG: rid}))
    assert len(runs) == 3  # the first run and two run retries, not a new decision
    assert final.tags.get("dagster/root_run_id") == run_id

    assert store.registry.alias("production") == 2
    assert [h["new_target"] for h in store.registry.alias_history("production")] == [1, 2]
    moves = [h for h in store.registry.alias_history("retrieval_index") if h["approval_id"] == rid]
    assert len(moves) == 1 and store.indexes.current_index()["model_version"] == 2
    assert store.sagas.load_saga(f"promote-{rid}")["status"] == "done"
    assert len([r for r in store.audit_log.records(rid) if r["event"] == "promoted"]) == 1
    assert store.audit_log.verify().ok
    topo.assert_running()
    report_recovery(capsys, "SIGKILL of the promotion worker twice, then the saga done by the last retry", recovered)


def _run_inside(topo: Any, rid: str) -> Any:
    """The approval's one STARTED run (the one whose worker waits at a failpoint)."""
    return wait_for(
        lambda: next(
            (r for r in topo.instance.get_runs(dg.RunsFilter(tags={APPROVAL_TAG: rid})) if r.status.value == "STARTED"),
            None,
        ),
        60,
        f"the started promotion run of {rid}",
    )
