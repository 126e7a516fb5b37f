"""Per-key and per-session limits on searches and feedback: in this process, and in a real Redis shared by two
API processes (two `RequestLimits`, one Redis), with the bucket that ran dry named and a Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime_ops.api.redis_buckets import RedisBuckets
from runtime_ops.api.request_limits import RequestLimits
from runtime_ops.settings import load_settings

T0 = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


def _limits(clock: Clock, shared: RedisBuckets | None = None) -> RequestLimits:
    settings = load_settings(
        RUNTIME_OPS_KEY_SEARCHES_PER_S=20.0, RUNTIME_OPS_SESSION_SEARCHES_PER_S=1.0, RUNTIME_OPS_KEY_FEEDBACK_PER_S=0
    )
    return RequestLimits(settings, clock, shared=shared)


@pytest.mark.parametrize("backend", ["process", "redis"])
def test_a_key_and_a_session_are_limited_apart(backend: str, request: pytest.FixtureRequest) -> None:
    clock = Clock()
    if backend == "redis":
        url = request.getfixturevalue("redis_url")
        replicas = [_limits(clock, RedisBuckets(url, burst=1, per_second=1.0)) for _ in range(2)]
    else:
        replicas = [_limits(clock)] * 2
    # A session's bucket holds 10 (the minimum burst): the 11th search of one session is refused, whichever
    # replica answers it, while its key (40: two seconds at 20/s) still has room.
    answers = [replicas[i % 2].spend("search", "key-a", "session-1") for i in range(11)]
    assert answers[:10] == [None] * 10
    refused = answers[10]
    assert refused is not None and refused.bucket == "session" and refused.retry_after == 1
    assert "RUNTIME_OPS_SESSION_SEARCHES_PER_S" in refused.message("search")
    # Every request spends from both buckets, the refused one too: 11 of the key's 40 are gone. Other sessions
    # (and none) use the rest, then the key itself is refused.
    assert [replicas[i % 2].spend("search", "key-a", f"user-{i}") for i in range(29)] == [None] * 29
    over = replicas[0].spend("search", "key-a", None)
    assert over is not None and over.bucket == "key" and "RUNTIME_OPS_KEY_SEARCHES_PER_S" in over.message("search")
    assert replicas[1].spend("search", "key-b", None) is None  # another key is not affected
    clock.at += timedelta(seconds=1)  # the key refills 20 tokens a second, a session 1
    assert replicas[0].spend("search", "key-a", "session-1") is None
    assert replicas[1].spend("search", "key-a", "session-1") is not None
    # A rate of 0 turns that limit off: feedback per key is not counted at all.
    assert all(replicas[0].spend("feedback", "key-a", None) is None for _ in range(100))


def test_without_redis_each_process_limits_on_its_own() -> None:
    clock = Clock()
    down = RedisBuckets("redis://127.0.0.1:1/0", burst=1, per_second=1.0, socket_timeout=0.2)
    limits = _limits(clock, down)
    assert [limits.spend("search", "k", "s") for _ in range(10)] == [None] * 10
    refused = limits.spend("search", "k", "s")
    assert refused is not None and refused.bucket == "session"
