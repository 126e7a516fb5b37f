"""Stalled runs: runs shown as started whose worker process lives but whose event log has gone silent for longer
than RUNTIME_OPS_RUN_STALL_TIMEOUT (default 1 h).

A worker can hang without dying: a step waiting on a socket nobody will answer, a deadlock. Dagster's run
monitoring cannot see that on the default launcher, and an orphan sweep (orphans.py) sees a live pid. Such a run
holds its batch, its lock or its promotion for ever. `sweep_stalled` first asks the worker and its children to
print every thread's stack (SIGUSR2, registered by the code location: `dump_stacks_on_signal`) so that the hang can
be diagnosed from the worker's log, then kills the whole process tree and marks the run failed with
UNEXPECTED_TERMINATION, which run retries relaunch, as for an orphan. It runs in `run_recovery_sensor`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import dagster as dg
import psutil

from runtime_ops.recovery.orphans import (
    LOCAL_LAUNCHERS,
    Orphan,
    fail_for_run_retries,
    launcher_class,
    process_info,
    worker_of,
)
from runtime_ops.recovery.workers import gone_reason, stall_reason

STACKS_SIGNAL = signal.SIGUSR2
# Long enough for faulthandler to write every thread's stack before the kill.
DUMP_GRACE_S = 1.0


def dump_stacks_on_signal() -> None:
    """Print every thread's stack to stderr on SIGUSR2 (inherited by forked step processes); idempotent."""
    with contextlib.suppress(ValueError, OSError, AttributeError):  # no usable stderr (a daemonised process)
        faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True, chain=False)


def last_event_at(instance: dg.DagsterInstance, run_id: str) -> float | None:
    records = instance.get_records_for_run(run_id, ascending=False, limit=1).records
    return records[0].event_log_entry.timestamp if records else None


def _process_tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def stop_process_tree(pid: int) -> int:
    """Ask `pid` and its descendants for their stacks, then SIGKILL them all; how many were killed."""
    tree = _process_tree(pid)
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(STACKS_SIGNAL)
    time.sleep(DUMP_GRACE_S)
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(tree, timeout=5)
    return len(tree)


def _started_run(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun | None:
    """The run as stored now, if it is still STARTED (it may have finished since it was listed)."""
    run = instance.get_run_by_id(run_id)
    return run if run is not None and run.status == dg.DagsterRunStatus.STARTED else None


def sweep_stalled(
    instance: dg.DagsterInstance,
    stall_after: timedelta | None,
    *,
    log: Callable[[str], None] = lambda _: None,
    now: Callable[[], float] = time.time,
    stop: Callable[[int], int] = stop_process_tree,
) -> list[Orphan]:
    """Kill and mark failed every started run whose live worker has been silent past `stall_after`."""
    limit_s = stall_after.total_seconds() if stall_after else None
    if not limit_s or launcher_class(instance) not in LOCAL_LAUNCHERS:
        return []
    found: list[Orphan] = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
        run = record.dagster_run
        last = last_event_at(instance, run.run_id)
        reason = stall_reason(last, now(), limit_s) if last is not None else None
        if reason is None:
            continue  # the common case, settled by one read
        worker = worker_of(instance, run.run_id)
        if worker is None or gone_reason(worker, process_info(worker.pid)) is not None:
            continue  # not ours to judge here: orphans.sweep handles a gone worker
        if _started_run(instance, run.run_id) is None:
            continue
        killed = stop(worker.pid)
        current = _started_run(instance, run.run_id)
        if current is None:
            continue  # it finished in the moment before the kill
        message = (
            f"Run {run.run_id} ({run.job_name}) was stalled: {reason} while its worker (pid {worker.pid}) lived. "
            f"Its {killed} processes printed their stacks to the worker's log (stderr) and were killed; marked failed "
            "so that run retries relaunch it, and the retry resumes from the state store"
        )
        found.append(fail_for_run_retries(instance, current, reason, message, log))
    return found
