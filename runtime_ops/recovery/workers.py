"""Whether a run's worker process is gone: pure decisions on what the event log and the process table say.

A pid alone does not identify a worker: after a restart (a container's pids start again from 1) another
process may carry the dead worker's pid. A process that was created after the worker announced itself cannot
be that worker.
"""

from __future__ import annotations

from dataclasses import dataclass

# Process creation times and event timestamps come from the same clock, but with different resolutions.
CLOCK_SLACK_S = 2.0


@dataclass(frozen=True)
class Worker:
    """A run worker as its run's event log announced it."""

    pid: int
    announced_at: float  # epoch seconds of the event that named the pid


@dataclass(frozen=True)
class ProcessInfo:
    """What the process table says about a pid now (None fields: no such process)."""

    pid: int
    created_at: float | None
    zombie: bool = False


def gone_reason(worker: Worker, process: ProcessInfo) -> str | None:
    """Why `worker` no longer runs, or None when `process` may still be it."""
    if process.created_at is None:
        return f"its worker process (pid {worker.pid}) no longer exists"
    if process.zombie:
        return f"its worker process (pid {worker.pid}) has exited"
    if process.created_at > worker.announced_at + CLOCK_SLACK_S:
        return (
            f"its worker process (pid {worker.pid}) no longer exists: that pid now belongs to a process started "
            "after the worker (the machine or container restarted)"
        )
    return None


def stall_reason(last_event_at: float, now: float, limit_s: float | None) -> str | None:
    """Why a run whose worker still lives counts as stalled, or None: its event log has been silent for longer than
    `limit_s` (None or 0: never)."""
    if not limit_s:
        return None
    silent = now - last_event_at
    if silent <= limit_s:
        return None
    return f"its event log has been silent for {silent:.0f} s (RUNTIME_OPS_RUN_STALL_TIMEOUT: {limit_s:g} s)"
