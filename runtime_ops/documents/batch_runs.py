"""What the landing sensor does about a launched batch whose ingestion run did not succeed (pure).

A batch is ingested by its run; if that run fails and Dagster will not retry it, nothing else would ever ingest
the batch: its documents would stay pending for good. Dagster's run retries do not cover every failure: a run
that could not be *launched* (the code server was down at that moment: "marked as failed from outside the
execution context") is never retried, and a step that exhausted its RetryPolicy fails the run for good when run
retries skip step failures. The landing sensor therefore relaunches such a batch under a new run key, a bounded
number of times, and then gives up loudly (the batch is marked failed; `runtime_ops_landing_oldest_pending_age_seconds`
and the sensor's log say which).

    decide(runs)  ->  "wait" | "relaunch" | "give_up"      runs: the batch's runs, newest first
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_LAUNCHES", "BatchRun", "decide", "relaunch_key"]

# Launches by the sensor (Dagster's own retries of each not counted): the first and two relaunches.
MAX_LAUNCHES = 3

Step = Literal["wait", "relaunch", "give_up"]


@dataclass(frozen=True)
class BatchRun:
    status: str  # a DagsterRunStatus value: "QUEUED", "STARTED", "SUCCESS", "FAILURE", "CANCELED", ...
    will_retry: str | None = None  # the run's `dagster/will_retry` tag: "true" while Dagster means to retry it
    is_retry: bool = False  # launched by Dagster's run retries (it has a parent run), not by the sensor


def decide(runs: list[BatchRun]) -> Step:
    """`runs` newest first. Wait while the newest run is on its way, succeeded (the batch is marked ingested by it),
    was cancelled (an operator's decision, not the sensor's to undo), or will be retried by Dagster; relaunch a
    final failure while the sensor has launched the batch fewer than MAX_LAUNCHES times; else give up."""
    if not runs:
        return "relaunch"
    newest = runs[0]
    if newest.status != "FAILURE" or (newest.will_retry or "").lower() == "true":
        return "wait"
    launches = sum(1 for run in runs if not run.is_retry)
    return "relaunch" if launches < MAX_LAUNCHES else "give_up"


def relaunch_key(batch_id: str, runs: list[BatchRun]) -> str:
    """The run key of the next launch: the batch id, then `<batch id>:launch<N>` (a used run key is a no-op)."""
    launches = sum(1 for run in runs if not run.is_retry)
    return f"{batch_id}:launch{launches + 1}"
