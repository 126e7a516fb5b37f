"""How Dagster retries runtime_ops' steps and runs: capped exponential retry policies, the wait a step asks for when
it requests a retry itself, and the run tags that keep approval-gated runs from being retried after a step failed.
The delays are computed by `runtime_ops.backoff`."""

from __future__ import annotations

import dagster as dg

from runtime_ops.backoff import capped_exponential, dagster_retries_within


def capped_retry_policy(delay_s: float, max_delay_s: float) -> dg.RetryPolicy:
    """Exponential backoff with full jitter whose longest wait stays under `max_delay_s`.

    Dagster's exponential delay is `(2^attempt - 1) * delay` with no cap, so the cap is kept by choosing how
    many retries there are; full jitter only ever shortens a wait.
    """
    retries = dagster_retries_within(delay_s, max_delay_s)
    if retries == 0:
        raise ValueError(f"a first retry after {delay_s}s already exceeds the cap of {max_delay_s}s")
    return dg.RetryPolicy(max_retries=retries, delay=delay_s, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.FULL)


def retry_wait(retry_number: int, max_delay_s: float) -> float:
    """The wait a step asks for in `dg.RetryRequested` before its next attempt (`retry_number` is Dagster's
    `context.retry_number`, 0 on the first attempt): 2, 4, 8, 16 s, ... capped at `max_delay_s` (Dagster's own
    backoff has no cap)."""
    return capped_exponential(retry_number + 1, base_s=2.0, factor=2.0, max_delay_s=max_delay_s)


def io_retry(delay_s: float = 2.0) -> dg.RetryPolicy:
    """I/O-bound steps (object store, database) retry transient failures four times, waiting at most `delay_s`,
    then 3x, 7x and 15x it (2, 6, 14, 30 s by default: RUNTIME_OPS_RETRY_DELAY). Work already recorded in the state
    store is skipped on the retry, so a retry resumes rather than repeats."""
    if delay_s <= 0:
        raise ValueError(f"the retry delay must be positive, got {delay_s}")
    return capped_retry_policy(delay_s=delay_s, max_delay_s=15 * delay_s)


# Runs that pass through the approval gate are re-executed by Dagster's run retries only when the run itself died
# (its worker was killed: run monitoring or `recovery.orphans` marks it failed), never after a step failed: a
# retried "pending approval" check would just fail again, and a refused promotion is retried by a new decision.
# The retry re-executes from the failure: a promotion re-verifies its approval and resumes its saga.
GATED_RUN_TAGS = {"dagster/retry_on_asset_or_op_failure": "false", "dagster/max_retries": "2"}
