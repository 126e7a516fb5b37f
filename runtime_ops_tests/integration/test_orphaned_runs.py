"""Orphaned runs on the default launcher: a run Dagster still shows as started whose worker process is gone is
marked failed with the reason, and run retries will relaunch it, approval-gated jobs included (they opt out of
retries only after a step failed). Runs whose worker lives, runs not started yet and finished runs are left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import dagster as dg
import psutil
import pytest
from dagster._core.events import EngineEventData, RunFailureReason
from dagster._core.execution.retries import auto_reexecution_should_retry_run
from dagster._core.storage.tags import RUN_FAILURE_REASON_TAG

from runtime_ops.cli.dev import DEV_INSTANCE, STORAGE_VARIABLE
from runtime_ops.recovery.orphans import sweep
from runtime_ops.recovery.stalls import sweep_stalled
from runtime_ops.retries import GATED_RUN_TAGS
from runtime_ops_tests.support.servers import wait_until


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, pid: int | None, **tags: str) -> str:
    run = dg.DagsterRun(job_name="demo__train_job", run_id=str(uuid.uuid4()), status=status, tags=tags)
    instance.add_run(run)
    if pid is not None:
        instance.report_engine_event(f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid))
    return run.run_id


def _failed_for_run_retries(instance: dg.DagsterInstance, run_id: str, *said: str) -> dg.DagsterRun:
    """The run, failed as a crash (which run retries relaunch) with a message saying each of `said`."""
    failed = instance.get_run_by_id(run_id)
    assert failed is not None
    assert failed.tags[RUN_FAILURE_REASON_TAG] == RunFailureReason.UNEXPECTED_TERMINATION.value
    messages = [e.message or "" for e in instance.all_logs(run_id)]
    assert any(all(part in m for part in said) for m in messages), messages
    assert auto_reexecution_should_retry_run(instance, failed, RunFailureReason.UNEXPECTED_TERMINATION)
    return failed


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
        failed = _failed_for_run_retries(instance, orphan, f"pid {dead}", "run retries relaunch it")
        # A gated run is retried after its worker died, never after a step failed.
        assert not auto_reexecution_should_retry_run(instance, failed, RunFailureReason.STEP_FAILURE)

        # A second sweep finds nothing more: the failed run is no longer started.
        assert sweep(instance) == []


HUNG_WORKER = """
import subprocess, sys, time
from runtime_ops.recovery.stalls import dump_stacks_on_signal

def wait_for_an_answer_that_never_comes():
    time.sleep(600)

dump_stacks_on_signal()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
wait_for_an_answer_that_never_comes()
"""


def test_a_run_whose_live_worker_went_silent_is_killed_with_its_stacks_printed_then_failed_for_run_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copyfile(DEV_INSTANCE, tmp_path / "dagster.yaml")
    monkeypatch.setenv(STORAGE_VARIABLE, str(tmp_path))
    log = tmp_path / "worker.log"
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    with log.open("w") as out, dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        worker = subprocess.Popen([sys.executable, "-c", HUNG_WORKER], stdout=subprocess.PIPE, stderr=out, text=True)
        working = subprocess.Popen(sleeper)
        try:
            child = int(worker.stdout.readline())  # type: ignore[union-attr]
            hung = _run(instance, dg.DagsterRunStatus.STARTED, worker.pid, **GATED_RUN_TAGS)
            busy = _run(instance, dg.DagsterRunStatus.STARTED, working.pid)
            gone = _run(instance, dg.DagsterRunStatus.STARTED, _dead_pid())

            # Silent for less than the limit, or no limit at all: nothing happens.
            assert sweep_stalled(instance, timedelta(minutes=5)) == []
            assert sweep_stalled(instance, None, now=lambda: time.time() + 3600) == []
            time.sleep(2.5)
            instance.report_engine_event("still working", instance.get_run_by_id(busy))

            found = sweep_stalled(instance, timedelta(seconds=2))

            assert [o.run_id for o in found] == [hung]
            # The worker and its child are gone (the sweep reaps what it killed: no returncode to read here).
            for pid in (worker.pid, child):
                wait_until(lambda pid=pid: not _alive(pid), 10, f"process {pid} killed")
            assert working.poll() is None  # the busy run's worker lives on
            stacks = log.read_text()
            assert "wait_for_an_answer_that_never_comes" in stacks, stacks  # where it hung, in its own log
            status = {r: instance.get_run_by_id(r).status for r in (hung, busy, gone)}  # type: ignore[union-attr]
            # A gone worker is orphans.sweep's to mark.
            assert status == {
                hung: dg.DagsterRunStatus.FAILURE,
                busy: dg.DagsterRunStatus.STARTED,
                gone: dg.DagsterRunStatus.STARTED,
            }
            _failed_for_run_retries(instance, hung, "was stalled: its event log has been silent", f"pid {worker.pid}")
        finally:
            for proc in (worker, working):
                proc.kill()
                proc.wait(10)
