"""Placing requests during a rollout (pure): canary is sticky per session and takes about its share of sessions,
interleave and shadow take about their share of requests, a growing share only adds sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runtime_ops.online.arms import CANDIDATE, INTERLEAVED, PRODUCTION, assign, bucket
from runtime_ops.online.request_ids import new_request_id
from runtime_ops.online.statistics import overlap_at_k

N = 20_000
NOW = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def test_canary_keeps_a_session_on_its_arm() -> None:
    for session in (f"s{i}" for i in range(200)):
        arms = {assign("canary", 0.3, 7, request_id=new_request_id(NOW), session=session).arm for _ in range(5)}
        assert len(arms) == 1, f"session {session} moved between arms: {arms}"


@pytest.mark.parametrize("share", [0.05, 0.25, 0.5])
def test_canary_takes_its_share_of_sessions(share: float) -> None:
    hits = sum(assign("canary", share, 3, request_id="q", session=f"user-{i}").arm == CANDIDATE for i in range(N))
    # Binomial(N, share): 5 standard deviations either way.
    spread = 5 * (share * (1 - share) / N) ** 0.5
    assert abs(hits / N - share) < spread


def test_a_ramp_only_adds_sessions_to_the_candidate() -> None:
    sessions = [f"user-{i}" for i in range(2000)]
    before = {s for s in sessions if assign("canary", 0.05, 9, request_id="q", session=s).arm == CANDIDATE}
    after = {s for s in sessions if assign("canary", 0.25, 9, request_id="q", session=s).arm == CANDIDATE}
    assert before < after


def test_rollouts_pick_their_own_sessions() -> None:
    sessions = [f"user-{i}" for i in range(2000)]
    one = {s for s in sessions if assign("canary", 0.1, 1, request_id="q", session=s).arm == CANDIDATE}
    two = {s for s in sessions if assign("canary", 0.1, 2, request_id="q", session=s).arm == CANDIDATE}
    assert one != two and len(one & two) < len(one) / 2


def test_without_a_session_each_request_is_its_own() -> None:
    ids = [new_request_id(NOW) for _ in range(N)]
    placed = [assign("canary", 0.2, 1, request_id=r, session=None).arm for r in ids]
    assert abs(placed.count(CANDIDATE) / N - 0.2) < 5 * (0.16 / N) ** 0.5
    assert placed == [assign("canary", 0.2, 1, request_id=r, session=None).arm for r in ids]


def test_interleave_and_shadow_take_their_share_of_requests() -> None:
    ids = [new_request_id(NOW) for _ in range(N)]
    interleaved = [assign("interleave", 0.1, 4, request_id=r, session="same").arm for r in ids]
    assert set(interleaved) == {INTERLEAVED, PRODUCTION}
    assert abs(interleaved.count(INTERLEAVED) / N - 0.1) < 5 * (0.09 / N) ** 0.5
    shadow = [assign("shadow", 0.1, 4, request_id=r, session=None) for r in ids]
    assert {a.arm for a in shadow} == {PRODUCTION}, "a shadow request is served by production"
    assert abs(sum(a.shadow for a in shadow) / N - 0.1) < 5 * (0.09 / N) ** 0.5


def test_share_one_takes_everything() -> None:
    assert all(assign("interleave", 1.0, 1, request_id=new_request_id(NOW), session=None).arm == INTERLEAVED
               for _ in range(500))  # fmt: skip


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="rollout mode 'off'"):
        assign("off", 0.1, 1, request_id="q", session=None)


def test_bucket_is_stable_and_in_range() -> None:
    assert bucket("a", "s") == bucket("a", "s") != bucket("a", "t")
    assert all(0 <= bucket(str(i), "s") < 1 for i in range(1000))


def test_overlap_at_k() -> None:
    assert overlap_at_k([1, 2, 3, 4], [4, 3, 9, 8], 4) == 0.5
    assert overlap_at_k([1, 2], [1, 2, 3], 3) == pytest.approx(2 / 3)
    assert overlap_at_k([1, 2, 3], [3, 2, 1], 2) == 0.5
    with pytest.raises(ValueError):
        overlap_at_k([1], [1], 0)
