"""Backoff arithmetic, in one place: the capped exponential delay after a failed attempt, and how many of
Dagster's exponential retries fit under a cap.

Every retry in runtime_ops computes its waits here: the HTTP retry policy (`http/retry.py`, `Backoff`), the
Dagster retry policies and requested retries (`retries.py`), and lock waiters' polls (`locks/base.py`). Jitter
and budgets stay with each user. Pure: no I/O, no randomness, no Dagster.
"""

from __future__ import annotations

import math


def capped_exponential(attempt: int, base_s: float, factor: float, max_delay_s: float) -> float:
    """The delay after failed attempt `attempt` (1-based): min(max_delay_s, base_s * factor^(attempt - 1)).
    A power too large for a float is capped like any other."""
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    try:
        raw = base_s * factor ** (attempt - 1)
    except OverflowError:
        raw = math.inf
    return min(max_delay_s, raw)


def dagster_retries_within(delay_s: float, max_delay_s: float) -> int:
    """How many retries Dagster's exponential `RetryPolicy` may make (it waits `(2^k - 1) * delay_s` before retry
    k, with no cap of its own) so that the longest wait stays under `max_delay_s`; 0 when even the first does not."""
    retries = 0
    while (2 ** (retries + 1) - 1) * delay_s <= max_delay_s:
        retries += 1
    return retries
