from __future__ import annotations

import dagster as dg
import pytest

from runtime_ops.retries import capped_retry_policy, io_retry


def test_capped_policy_never_waits_longer_than_the_cap() -> None:
    policy = capped_retry_policy(delay_s=2.0, max_delay_s=30.0)
    assert policy.max_retries == 4 and policy.jitter == dg.Jitter.FULL
    assert policy.delay is not None
    longest = (2**policy.max_retries - 1) * policy.delay
    assert longest <= 30.0 < (2 ** (policy.max_retries + 1) - 1) * policy.delay
    assert policy == io_retry()
    with pytest.raises(ValueError, match="exceeds the cap"):
        capped_retry_policy(delay_s=10.0, max_delay_s=5.0)


def test_a_shorter_retry_delay_keeps_four_retries_and_scales_every_wait() -> None:
    short = io_retry(0.1)
    assert short.max_retries == io_retry().max_retries == 4
    assert short.delay == pytest.approx(0.1)
    with pytest.raises(ValueError, match="positive"):
        io_retry(0.0)
