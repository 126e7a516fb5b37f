"""The refusal policy, directly: one record per window and channel, the rest summed; a bucket per client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime_ops.policies.refusals import RefusalPolicy

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def test_the_first_refusal_of_a_window_is_recorded_the_rest_summed_when_it_closes() -> None:
    policy = RefusalPolicy(window_s=60, burst=1000, per_second=1)
    verdicts = [
        policy.refused("slack", "forged", f"10.0.0.{i % 3}", T0 + timedelta(seconds=i), f"r{i % 2}") for i in range(50)
    ]
    assert [v.record for v in verdicts] == [True] + [False] * 49
    assert all(v.summaries == () for v in verdicts)
    assert policy.refused("api", "unauthenticated", "10.0.0.9", T0).record  # another channel: its own window
    later = policy.refused("slack", "forged", "10.0.0.1", T0 + timedelta(seconds=61))
    assert later.record
    [summary] = later.summaries
    assert (summary.channel, summary.outcome, summary.count) == ("slack", "forged", 49)
    assert (summary.first_at, summary.last_at) == (T0, T0 + timedelta(seconds=49))
    assert dict(summary.clients) == {"10.0.0.0": 16, "10.0.0.1": 17, "10.0.0.2": 16}
    assert dict(summary.reasons) == {"r0": 24, "r1": 25}
    assert policy.close() == ()  # the api window had nothing after its first; the new slack one neither


def test_a_client_over_its_bucket_is_told_to_wait_and_refills_with_time() -> None:
    policy = RefusalPolicy(window_s=60, burst=3, per_second=0.5)
    waits = [policy.refused("api", "unauthenticated", "a", T0, None).retry_after for _ in range(5)]
    assert waits == [None, None, None, 2, 2]
    assert policy.refused("api", "unauthenticated", "b", T0, None).retry_after is None  # per client
    assert policy.refused("api", "unauthenticated", "a", T0 + timedelta(seconds=2), None).retry_after is None
    [summary] = policy.close()
    assert summary.limited == 2 and summary.count == 6


def test_nonsense_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        RefusalPolicy(window_s=0)
