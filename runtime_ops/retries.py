from __future__ import annotations

import dagster as dg

# I/O-bound steps (object store, database) retry transient failures. Work already recorded in the state
# store is skipped on the retry, so a retry resumes rather than repeats.
IO_RETRY = dg.RetryPolicy(max_retries=3, delay=2.0, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)

# Runs that pass through the approval gate must not be re-executed by Dagster's run retries: a retried
# "pending approval" check would just fail again, and a promotion is retried by a new decision instead.
GATED_RUN_TAGS = {"dagster/retry_on_asset_or_op_failure": "false", "dagster/max_retries": "0"}
