"""Orphaned runs on the default launcher: a run Dagster still shows as started whose worker process is gone is
marked failed with the reason, and run retries will relaunch it, approval-gated jobs included (they opt out of
retries only after a step failed). Runs whose worker lives, runs not started yet and finished runs are left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import EngineEventData, RunFailureReason
from dagster._core.execution.retries import auto_reexecution_should_retry_run
from dagster._core.storage.tags import RUN_FAILURE_REASON_TAG

from runtime_ops.cli.dev import DEV_INSTANCE, STORAGE_VARIABLE
from runtime_ops.recovery.orphans import sweep
from runtime_ops.retries import GATED_RUN_TAGS


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, pid: int | None, **tags: str) -> str:
    run = dg.DagsterRun(job_name="demo__train_job", run_id=str(uuid.uuid4()), status=status, tags=tags)
    instance.add_run(run)
    if pid is not None:
        instance.report_engine_event(f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid))
    return run.run_id


def test_runs_whose_worker_is_gone_are_failed_for_run_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copyfile(DEV_INSTANCE, tmp_path / "dagster.yaml")
    monkeypatch.setenv(STORAGE_VARIABLE, str(tmp_path))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        dead = _dead_pid()
        orphan = _run(instance, dg.DagsterRunStatus.STARTED, dead, **GATED_RUN_TAGS)
        starting_orphan = _run(instance, dg.DagsterRunStatus.STARTING, _dead_pid())
        alive = _run(instance, dg.DagsterRunStatus.STARTED, os.getpid())
        not_launched = _run(instance, dg.DagsterRunStatus.STARTING, None)
        finished = _run(instance, dg.DagsterRunStatus.SUCCESS, _dead_pid())

        found = sweep(instance)

        assert {o.run_id for o in found} == {orphan, starting_orphan}
        status = {r: instance.get_run_by_id(r).status for r in (orphan, alive, not_launched, finished)}  # type: ignore[union-attr]
        assert status == {
            orphan: dg.DagsterRunStatus.FAILURE,
            alive: dg.DagsterRunStatus.STARTED,
            not_launched: dg.DagsterRunStatus.STARTING,
            finished: dg.DagsterRunStatus.SUCCESS,
        }
        failed = instance.get_run_by_id(orphan)
        assert failed is not None
        assert failed.tags[RUN_FAILURE_REASON_TAG] == RunFailureReason.UNEXPECTED_TERMINATION.value
        messages = [e.message or "" for e in instance.all_logs(orphan)]
        assert any(f"pid {dead}" in m and "run retries relaunch it" in m for m in messages), messages
        # A gated run is retried after its worker died, never after a step failed.
        assert auto_reexecution_should_retry_run(instance, failed, RunFailureReason.UNEXPECTED_TERMINATION)
        assert not auto_reexecution_should_retry_run(instance, failed, RunFailureReason.STEP_FAILURE)

        # A second sweep finds nothing more: the failed run is no longer started.
        assert sweep(instance) == []
