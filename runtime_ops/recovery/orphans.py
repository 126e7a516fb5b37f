"""Orphaned runs: runs that Dagster still shows as started though their worker process is gone.

Dagster's run monitoring detects a dead worker only for launchers that can check a worker's health (Docker,
Kubernetes, ECS). The default launcher (`dg dev` under `runtime-ops dev`, and a daemon with a gRPC code server
on one machine) cannot: after a SIGKILL, an out-of-memory kill or a power loss its runs stay STARTED for ever,
every sensor waits on them, and nothing is relaunched. `sweep` finds them by the pid their worker announced in the run's
event log and marks them failed with the reason (failure reason UNEXPECTED_TERMINATION, so that run retries
relaunch them: also the approval-gated jobs, which opt out only of retries after a step failure). The retry
resumes from the state store; a promotion resumes its saga.

It runs at the start of `runtime-ops dev` and in `run_recovery_sensor` (sensor.py). Sensors evaluate in the code
server, the process that the default launcher starts run workers from, so the pids are on this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg
import psutil
from dagster._core.events import DagsterEventType, JobFailureData, RunFailureReason

from runtime_ops.recovery.workers import ProcessInfo, Worker, gone_reason

# Launchers whose workers are local processes of the code server that launched them, and which Dagster's run
# monitoring cannot check. The others (Docker, Kubernetes, ECS) are checked by run monitoring itself.
LOCAL_LAUNCHERS = frozenset({"DefaultRunLauncher"})
WATCHED = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


@dataclass(frozen=True)
class Orphan:
    run_id: str
    job_name: str
    reason: str


def launcher_class(instance: dg.DagsterInstance) -> str:
    """The class name of the instance's run launcher, without instantiating it (some need cloud credentials)."""
    ref = instance.get_ref() if instance.is_persistent else None
    data = ref.run_launcher_data if ref is not None else None
    return data.class_name if data is not None else type(instance.run_launcher).__name__


def worker_of(instance: dg.DagsterInstance, run_id: str) -> Worker | None:
    """The run's worker: the first engine event carrying a pid (the worker's "Started process for run")."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=20).records
    for record in records:
        event = record.event_log_entry.dagster_event
        data = event.engine_event_data if event is not None else None
        pid = data.metadata.get("pid") if data is not None else None
        if pid is not None and str(pid.value).isdigit():
            return Worker(int(str(pid.value)), record.event_log_entry.timestamp)
    return None


def process_info(pid: int) -> ProcessInfo:
    try:
        proc = psutil.Process(pid)
        return ProcessInfo(pid, proc.create_time(), zombie=proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return ProcessInfo(pid, None)
    except psutil.AccessDenied:  # someone else's process: alive, and not one of our workers
        return ProcessInfo(pid, float("inf"))


def sweep(
    instance: dg.DagsterInstance,
    *,
    log: Callable[[str], None] = lambda _: None,
    probe: Callable[[int], ProcessInfo] = process_info,
) -> list[Orphan]:
    """Mark failed every started run whose worker is gone; returns what it marked. Does nothing for launchers
    that run monitoring covers."""
    if launcher_class(instance) not in LOCAL_LAUNCHERS:
        return []
    found: list[Orphan] = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=WATCHED)):
        run = record.dagster_run
        worker = worker_of(instance, run.run_id)
        if worker is None:
            continue  # not started yet: run monitoring's start timeout covers a launch that never happened
        reason = gone_reason(worker, probe(worker.pid))
        if reason is None:
            continue
        now = instance.get_run_by_id(run.run_id)
        if now is None or now.status not in WATCHED:
            continue  # it finished while we looked
        message = (
            f"Run {run.run_id} ({run.job_name}) was still {now.status.value} but {reason} (a crash, an "
            "out-of-memory kill or a stop of `runtime-ops dev`): marked failed so that run retries relaunch it; "
            "the retry resumes from the state store"
        )
        found.append(fail_for_run_retries(instance, now, reason, message, log))
    return found


def fail_for_run_retries(
    instance: dg.DagsterInstance, run: dg.DagsterRun, reason: str, message: str, log: Callable[[str], None]
) -> Orphan:
    """Mark `run` failed as a crash (UNEXPECTED_TERMINATION), which run retries relaunch, gated jobs included."""
    instance.report_run_failed(
        run, message, JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION)
    )
    log(message)
    return Orphan(run.run_id, run.job_name, reason)
