"""The model-endpoint client against a real local server that injects faults (no mocks of httpx).

Observed delays are the gaps between request arrivals at the server; each must cover the delay the client
chose (`on_retry`) and stay within the policy's bounds plus a small scheduling tolerance.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator

import pytest

from runtime_ops.http import Backoff, EndpointError
from runtime_ops.serving.endpoint import SYSTEM_PROMPT, ChatEndpoint
from runtime_ops_tests.support.fault_server import FaultServer, ok, reset, slow, status, truncated

TOLERANCE_S = 0.25  # loopback round trip + thread scheduling on a loaded 2-core machine
FAST = Backoff(base_s=0.05, factor=2.0, max_delay_s=2.0, max_attempts=5, jitter="full", max_total_s=10.0)
SEED = 1234
API_KEY = "sk-test-NOT-A-REAL-KEY-5f1c2a"


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


class Retries(list):
    """`on_retry` recorder: [(attempt, delay_s, problem), ...]."""

    def __call__(self, attempt: int, delay: float, problem: str) -> None:
        self.append((attempt, delay, problem))

    @property
    def delays(self) -> list[float]:
        return [d for _, d, _ in self]


def make(server: FaultServer, *, backoff: Backoff = FAST, url: str | None = None, **kw) -> tuple[ChatEndpoint, Retries]:
    retries = Retries()
    endpoint = ChatEndpoint(url or server.base_url, backoff=backoff, rng=random.Random(SEED), on_retry=retries, **kw)
    return endpoint, retries


def assert_gaps_cover(server: FaultServer, delays: list[float], *, extra: float = 0.0) -> list[float]:
    """Each arrival gap >= the chosen delay (+ `extra`, e.g. a timeout) and < it + tolerance."""
    gaps = server.gaps()
    assert len(gaps) == len(delays), (gaps, delays)
    for gap, delay in zip(gaps, delays, strict=True):
        assert gap >= delay + extra - 0.01, (gap, delay, extra)
        assert gap < delay + extra + TOLERANCE_S, (gap, delay, extra)
    return gaps


# --- the happy path -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["base", "base/", "full"])
def test_answer_posts_an_openai_chat_completion(server: FaultServer, form: str) -> None:
    url = {"base": server.base_url, "base/": server.base_url + "/", "full": server.url}[form]
    server.push(ok("  Promotion needs an approval [1].  "))
    endpoint, retries = make(server, url=url, model="rag-test")
    with endpoint:
        text = endpoint.answer("How is a model promoted?", ["Promotion needs approval.", "Other text."], max_tokens=50)
    assert text == "Promotion needs an approval [1]."
    assert retries == []
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert "authorization" not in {k.lower() for k in request.headers}
    body = request.body
    assert body["model"] == "rag-test" and body["max_tokens"] == 50
    system, user = body["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert "[1] Promotion needs approval." in user["content"] and "[2] Other text." in user["content"]
    assert user["content"].endswith("Question: How is a model promoted?")


def test_api_key_is_sent_as_bearer_and_never_shown(server: FaultServer) -> None:
    # The server even echoes the key in its error body; the client must scrub it.
    server.push(ok("fine"), status(401, body={"error": {"message": f"Incorrect API key provided: {API_KEY}"}}))
    endpoint, _ = make(server, api_key=API_KEY)
    with endpoint:
        assert endpoint.answer("q", ["p"]) == "fine"
        with pytest.raises(EndpointError) as caught:
            endpoint.answer("q", ["p"])
    assert [r.headers.get("Authorization") for r in server.requests] == [f"Bearer {API_KEY}"] * 2
    err = caught.value
    assert API_KEY not in str(err) and API_KEY not in err.problem and API_KEY not in repr(endpoint)
    assert server.url in str(err) and "401" in str(err)


# --- transient failures are retried, with the policy's delays -------------------------------------------------


def test_429_retry_after_is_honoured(server: FaultServer) -> None:
    server.push(status(429, retry_after=1))
    endpoint, retries = make(server)
    with endpoint:
        assert endpoint.answer("q", ["p"]) == "stub answer [1]"
    assert len(server.requests) == 2
    assert retries.delays == [1.0]  # Retry-After replaces the (much smaller) computed delay
    [gap] = assert_gaps_cover(server, [1.0])
    assert 1.0 <= gap < 1.0 + TOLERANCE_S


def test_retry_after_is_capped_at_max_delay(server: FaultServer) -> None:
    server.push(status(503, retry_after=3600))
    endpoint, retries = make(server, backoff=Backoff(base_s=0.05, max_delay_s=0.3, max_total_s=5.0))
    with endpoint:
        endpoint.answer("q", ["p"])
    assert retries.delays == [0.3]
    assert_gaps_cover(server, [0.3])


def test_5xx_are_retried_with_full_jitter_backoff(server: FaultServer) -> None:
    server.push(status(500), status(500), status(502))
    endpoint, retries = make(server)
    with endpoint:
        assert endpoint.answer("q", ["p"]) == "stub answer [1]"
    assert len(server.requests) == 4
    # The delays are the policy's, drawn from the seeded RNG, each within [0, base * factor^n] ...
    expected_rng = random.Random(SEED)
    assert retries.delays == [FAST.delay(n, expected_rng) for n in (1, 2, 3)]
    for n, delay in enumerate(retries.delays, start=1):
        assert 0.0 <= delay <= FAST.base_s * FAST.factor ** (n - 1)
    # ... and the server saw them: gaps between arrivals cover each delay, within tolerance of its ceiling.
    gaps = assert_gaps_cover(server, retries.delays)
    for n, gap in enumerate(gaps, start=1):
        assert gap <= FAST.ceiling(n) + TOLERANCE_S
    assert [a for a, _, _ in retries] == [1, 2, 3]
    assert all("HTTP 50" in p for _, _, p in retries)


def test_slow_response_times_out_and_is_retried(server: FaultServer) -> None:
    server.push(slow(2.0))
    endpoint, retries = make(server, timeout_s=0.3)
    with endpoint:
        started = time.monotonic()
        assert endpoint.answer("q", ["p"]) == "stub answer [1]"
        took = time.monotonic() - started
    assert len(server.requests) == 2
    assert "ReadTimeout" in retries[0][2]
    assert_gaps_cover(server, retries.delays, extra=0.3)  # the timeout, then the backoff delay
    assert took < 1.0  # did not wait for the slow answer


@pytest.mark.parametrize("full_length", [False, True], ids=["invalid-json", "cut-connection"])
def test_truncated_json_is_retried(server: FaultServer, full_length: bool) -> None:
    server.push(truncated(full_length=full_length), truncated(full_length=full_length))
    endpoint, retries = make(server)
    with endpoint:
        assert endpoint.answer("q", ["p"]) == "stub answer [1]"
    assert len(server.requests) == 3
    expected = "RemoteProtocolError" if full_length else "invalid JSON body"
    assert all(expected in p for _, _, p in retries), retries
    assert_gaps_cover(server, retries.delays)


def test_connection_reset_is_retried(server: FaultServer) -> None:
    server.push(reset(), reset())
    endpoint, retries = make(server)
    with endpoint:
        assert endpoint.answer("q", ["p"]) == "stub answer [1]"
    assert len(server.requests) == 3
    assert len(retries) == 2
    assert_gaps_cover(server, retries.delays)


def test_connection_refused_gives_up_naming_the_endpoint() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    url = f"http://127.0.0.1:{port}/v1"
    retries = Retries()
    backoff = Backoff(base_s=0.01, max_attempts=3)
    endpoint = ChatEndpoint(url, backoff=backoff, rng=random.Random(SEED), on_retry=retries)
    with endpoint, pytest.raises(EndpointError) as caught:
        endpoint.answer("q", ["p"])
    err = caught.value
    assert f"{url}/chat/completions" in str(err) and "3 attempts" in str(err) and "ConnectError" in str(err)
    assert err.status is None and err.retryable and err.attempts == 3 and len(retries) == 2


# --- giving up ---------------------------------------------------------------------------------------------


def test_persistent_503_gives_up_after_max_attempts(server: FaultServer) -> None:
    server.default = status(503)
    backoff = Backoff(base_s=0.05, factor=2.0, max_attempts=4, max_total_s=5.0)
    endpoint, retries = make(server, backoff=backoff)
    with endpoint:
        started = time.monotonic()
        with pytest.raises(EndpointError) as caught:
            endpoint.answer("q", ["p"])
        elapsed = time.monotonic() - started
    err = caught.value
    assert len(server.requests) == 4
    assert server.url in str(err) and "4 attempts" in str(err) and "503" in str(err)
    assert err.attempts == 4 and err.status == 503 and err.retryable is True
    assert err.delays == retries.delays and len(err.delays) == 3
    assert elapsed < backoff.max_total_s
    assert elapsed <= sum(backoff.ceiling(n) for n in (1, 2, 3)) + TOLERANCE_S
    assert_gaps_cover(server, err.delays)


def test_total_time_budget_stops_retrying(server: FaultServer) -> None:
    server.default = status(500)
    backoff = Backoff(base_s=0.1, factor=1.0, jitter="none", max_attempts=100, max_total_s=0.45)
    endpoint, _ = make(server, backoff=backoff)
    with endpoint:
        started = time.monotonic()
        with pytest.raises(EndpointError) as caught:
            endpoint.answer("q", ["p"])
        elapsed = time.monotonic() - started
    assert elapsed < backoff.max_total_s + TOLERANCE_S
    assert 3 <= len(server.requests) <= 5
    assert "max_total_s=0.45" in str(caught.value) and server.url in str(caught.value)


# --- never retried -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 422])
def test_other_4xx_fail_at_once(server: FaultServer, code: int) -> None:
    server.push(status(code))
    endpoint, retries = make(server)
    with endpoint, pytest.raises(EndpointError) as caught:
        endpoint.answer("q", ["p"])
    assert len(server.requests) == 1  # exactly one request: no retry
    err = caught.value
    assert err.status == code and err.retryable is False and err.attempts == 1 and retries == []
    assert server.url in str(err) and str(code) in str(err)


def test_unknown_path_404_is_not_retried(server: FaultServer) -> None:
    endpoint, retries = make(server, url=f"http://127.0.0.1:{server.port}/v2")
    with endpoint, pytest.raises(EndpointError) as caught:
        endpoint.answer("q", ["p"])
    assert caught.value.status == 404 and len(server.requests) == 1 and retries == []


def test_well_formed_reply_of_the_wrong_shape_is_not_retried(server: FaultServer) -> None:
    server.push(status(200, body={"object": "list", "data": []}))
    endpoint, retries = make(server)
    with endpoint, pytest.raises(EndpointError) as caught:
        endpoint.answer("q", ["p"])
    assert len(server.requests) == 1 and retries == []
    assert "choices[0].message.content" in str(caught.value) and caught.value.retryable is False
