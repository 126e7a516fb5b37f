"""The retry policy (`runtime_ops.http.retry`): backoff bounds and cap, Retry-After parsing, classification;
and the retry loop (`call_with_retries`) driven by a fake clock, so no test here sleeps or opens a socket."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from runtime_ops.http import Backoff, EndpointError, InvalidResponse, call_with_retries, classify, parse_retry_after
from runtime_ops.http.retry import Jitter

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


# --- backoff -----------------------------------------------------------------------------------------------


def test_ceiling_grows_exponentially_and_is_capped() -> None:
    policy = Backoff(base_s=0.5, factor=2.0, max_delay_s=20.0)
    assert [policy.ceiling(n) for n in range(1, 9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0]
    assert policy.ceiling(10_000) == 20.0  # no overflow far out


@pytest.mark.parametrize("jitter", ["full", "equal", "none"])
def test_delays_stay_within_the_policy_bounds(jitter: Jitter) -> None:
    policy = Backoff(base_s=0.1, factor=3.0, max_delay_s=5.0, jitter=jitter)
    rng = random.Random(42)
    for attempt in range(1, 12):
        cap = min(5.0, 0.1 * 3.0 ** (attempt - 1))
        low = {"full": 0.0, "equal": cap / 2, "none": cap}[jitter]
        assert policy.bounds(attempt) == pytest.approx((low, cap))
        samples = [policy.delay(attempt, rng) for _ in range(500)]
        assert all(low <= d <= cap for d in samples), (attempt, min(samples), max(samples))
        if jitter != "none":  # the jitter really spreads the delays over the range
            assert min(samples) < low + 0.1 * (cap - low) and max(samples) > cap - 0.1 * (cap - low)


def test_delay_endpoints_with_an_injected_rng() -> None:
    full = Backoff(base_s=1.0, factor=2.0, max_delay_s=6.0, jitter="full")
    assert full.delay(3, FixedRandom(0.0)) == 0.0
    assert full.delay(3, FixedRandom(0.5)) == 2.0
    assert full.delay(5, FixedRandom(0.5)) == 3.0  # capped at 6, then jittered
    equal = Backoff(base_s=1.0, factor=2.0, max_delay_s=6.0, jitter="equal")
    assert equal.delay(2, FixedRandom(0.0)) == 1.0 and equal.delay(2, FixedRandom(0.5)) == 1.5
    assert Backoff(base_s=1.0, jitter="none").delay(3, FixedRandom(0.9)) == 4.0


def test_same_seed_same_delays() -> None:
    policy = Backoff()
    a, b = random.Random(7), random.Random(7)
    assert [policy.delay(n, a) for n in range(1, 6)] == [policy.delay(n, b) for n in range(1, 6)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_s": -1},
        {"factor": 0.5},
        {"max_delay_s": -0.1},
        {"max_attempts": 0},
        {"jitter": "decorrelated"},
        {"max_total_s": 0},
        {"base_s": float("nan")},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="Backoff"):
        Backoff(**kwargs)


def test_attempts_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        Backoff().delay(0, random.Random())


# --- Retry-After -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1", 1.0), (" 3 ", 3.0), ("0", 0.0), ("1.5", 1.5), ("120", 120.0)],
)
def test_retry_after_delta_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize("value", [None, "", "  ", "-1", "soon", "nan", "inf", "1e999", "Mon, 99 Foo 2025"])
def test_retry_after_unusable_values_are_ignored(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None
    assert Backoff().retry_after_delay(value, NOW) is None


@pytest.mark.parametrize(
    "value",
    [
        "Sat, 01 Mar 2025 12:00:05 GMT",  # IMF-fixdate
        "Saturday, 01-Mar-25 12:00:05 GMT",  # RFC 850
        "Sat Mar  1 12:00:05 2025",  # asctime (no zone: GMT)
    ],
)
def test_retry_after_http_date(value: str) -> None:
    assert parse_retry_after(value, NOW) == pytest.approx(5.0)
    assert parse_retry_after(value, NOW.timestamp()) == pytest.approx(5.0)  # now as a POSIX timestamp


def test_retry_after_date_in_the_past_means_now() -> None:
    assert parse_retry_after("Sat, 01 Mar 2025 11:59:00 GMT", NOW) == 0.0


def test_retry_after_is_capped_at_max_delay() -> None:
    policy = Backoff(max_delay_s=20.0)
    assert policy.retry_after_delay("7", NOW) == 7.0
    assert policy.retry_after_delay("3600", NOW) == 20.0
    later = (NOW + timedelta(hours=1)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert policy.retry_after_delay(later, NOW) == 20.0


# --- classification ----------------------------------------------------------------------------------------

_REQUEST = httpx.Request("POST", "http://model.invalid/v1/chat/completions")


def _json_error() -> json.JSONDecodeError:
    try:
        json.loads('{"choices": [')
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, "ok"),
        (201, "ok"),
        (204, "ok"),
        (429, "retry"),
        (500, "retry"),
        (501, "retry"),
        (502, "retry"),
        (503, "retry"),
        (504, "retry"),
        (599, "retry"),
        (400, "fail"),
        (401, "fail"),
        (403, "fail"),
        (404, "fail"),
        (408, "fail"),
        (409, "fail"),
        (413, "fail"),
        (422, "fail"),
        (301, "fail"),
        (304, "fail"),
        (101, "fail"),
    ],
)
def test_classify_by_status(status: int, verdict: str) -> None:
    assert classify(status, None) == verdict


@pytest.mark.parametrize(
    ("status", "exc", "verdict"),
    [
        (None, httpx.ConnectError("refused", request=_REQUEST), "retry"),
        (None, httpx.ConnectTimeout("timed out", request=_REQUEST), "retry"),
        (None, httpx.ReadTimeout("timed out", request=_REQUEST), "retry"),
        (None, httpx.WriteTimeout("timed out", request=_REQUEST), "retry"),
        (None, httpx.PoolTimeout("timed out", request=_REQUEST), "retry"),
        (None, httpx.ReadError("reset", request=_REQUEST), "retry"),
        (None, httpx.WriteError("broken pipe", request=_REQUEST), "retry"),
        (None, httpx.RemoteProtocolError("disconnected", request=_REQUEST), "retry"),
        (None, ConnectionResetError(104, "reset"), "retry"),
        (None, ConnectionRefusedError(111, "refused"), "retry"),
        (None, TimeoutError("timed out"), "retry"),
        (200, _json_error(), "retry"),
        (200, InvalidResponse("cut off", transient=True), "retry"),
        (200, InvalidResponse("no choices", transient=False), "fail"),
        (None, httpx.UnsupportedProtocol("ftp://", request=_REQUEST), "fail"),
        (None, httpx.LocalProtocolError("bad header", request=_REQUEST), "fail"),
        (None, ValueError("a bug"), "fail"),
        (None, KeyError("a bug"), "fail"),
        (503, httpx.ReadError("reset", request=_REQUEST), "retry"),  # the status decides when not 2xx
        (400, _json_error(), "fail"),
    ],
)
def test_classify_by_exception(status: int | None, exc: BaseException, verdict: str) -> None:
    assert classify(status, exc) == verdict


def test_classify_needs_something() -> None:
    with pytest.raises(ValueError):
        classify(None, None)


# --- the retry loop on a fake clock ------------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _scripted(*outcomes: httpx.Response | BaseException):
    queue = list(outcomes)
    calls = []

    def send() -> httpx.Response:
        calls.append(1)
        outcome = queue.pop(0) if queue else httpx.Response(200, json={"ok": True}, request=_REQUEST)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return send, calls


def _resp(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, text="busy", request=_REQUEST)


def test_loop_uses_retry_after_instead_of_the_computed_delay() -> None:
    t = FakeTime()
    send, calls = _scripted(_resp(429, **{"Retry-After": "3"}), _resp(503), httpx.ReadTimeout("t", request=_REQUEST))
    policy = Backoff(base_s=1.0, factor=2.0, jitter="none")
    response = call_with_retries(send, what="http://m/v1", backoff=policy, sleep=t.sleep, clock=t.clock)
    assert response.status_code == 200 and len(calls) == 4
    assert t.slept == [3.0, 2.0, 4.0]  # Retry-After, then ceiling(2), ceiling(3)


def test_loop_stops_before_the_total_budget_would_be_exceeded() -> None:
    t = FakeTime()
    send, calls = _scripted(*[_resp(500) for _ in range(50)])
    policy = Backoff(base_s=1.0, factor=2.0, jitter="none", max_attempts=50, max_total_s=10.0)
    with pytest.raises(EndpointError, match="max_total_s=10") as caught:
        call_with_retries(send, what="http://m/v1", backoff=policy, sleep=t.sleep, clock=t.clock)
    assert t.slept == [1.0, 2.0, 4.0] and len(calls) == 4  # 7 s slept; 8 s more would end at 15 s
    assert caught.value.delays == [1.0, 2.0, 4.0] and caught.value.retryable


def test_loop_fails_fast_on_4xx_and_redacts_secrets() -> None:
    t = FakeTime()
    send, calls = _scripted(httpx.Response(401, text="bad key sk-secret-1", request=_REQUEST))
    with pytest.raises(EndpointError) as caught:
        call_with_retries(send, what="http://m/v1", backoff=Backoff(), sleep=t.sleep, redact=["sk-secret-1"])
    assert len(calls) == 1 and t.slept == []
    assert "sk-secret-1" not in str(caught.value) and "http://m/v1" in str(caught.value)
    assert caught.value.status == 401 and caught.value.retryable is False


def test_loop_lets_programming_errors_through() -> None:
    def send() -> httpx.Response:
        raise TypeError("a bug, not a network problem")

    with pytest.raises(TypeError):
        call_with_retries(send, what="http://m/v1", backoff=Backoff(), sleep=lambda s: None)
