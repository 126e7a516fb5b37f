"""`OpenAIEmbedder` against a real local embeddings server that injects faults (no mocks of httpx).

The server's vectors are a function of the text (`expected_vector`), so every test can compute what the
embedder must return: the same rows, L2-normalised, in input order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from runtime_ops.embedders.openai import OpenAIEmbedder, embeddings_url
from runtime_ops.http import Backoff, EndpointError
from runtime_ops_tests.support.embeddings_server import (
    EmbeddingsServer,
    bad_value,
    expected_vector,
    reversed_order,
    slow,
    status,
    tokens,
    truncated,
    wrong_count,
    wrong_dim,
)

DIM = 8
MODEL = "test-embed"
API_KEY = "sk-test-NOT-A-REAL-KEY-9d3e7b"
TOLERANCE_S = 0.25  # loopback round trip + thread scheduling on a loaded 2-core machine
FAST = Backoff(base_s=0.02, factor=2.0, max_delay_s=2.0, max_attempts=4, jitter="full", max_total_s=10.0)
TEXTS = [f"text number {i} about model promotion" for i in range(10)]


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer(dim=DIM) as srv:
        yield srv


class Retries(list[tuple[int, float, str]]):
    """`on_retry` recorder: [(attempt, delay_s, problem), ...]."""

    def __call__(self, attempt: int, delay: float, problem: str) -> None:
        self.append((attempt, delay, problem))


def make(server: EmbeddingsServer, **kw: Any) -> OpenAIEmbedder:
    options: dict[str, Any] = {"backoff": FAST, "rng": random.Random(1234), "api_key": API_KEY}
    options.update(kw)
    return OpenAIEmbedder(options.pop("endpoint", server.base_url), MODEL, DIM, **options)


def expected(texts: list[str], dim: int = DIM) -> np.ndarray:
    rows = np.array([expected_vector(t, dim) for t in texts], dtype=np.float64).reshape(len(texts), dim)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def assert_rows(vectors: np.ndarray, texts: list[str]) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(texts), DIM)
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6, atol=1e-6)


# --- the happy path -----------------------------------------------------------------------------------------


def test_embed_returns_the_servers_vectors_normalised_in_order_batched_by_count(server: EmbeddingsServer) -> None:
    with make(server, batch_size=3, concurrency=1) as embedder:
        vectors = embedder.embed(TEXTS)
    assert_rows(vectors, TEXTS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert server.inputs() == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:9], TEXTS[9:10]]
    first = server.requests[0]
    assert first.method == "POST" and first.path == "/v1/embeddings"
    assert first.headers["Authorization"] == f"Bearer {API_KEY}"
    assert first.body == {"model": MODEL, "input": TEXTS[0:3], "encoding_format": "float"}  # no "dimensions"


def test_batches_are_bounded_by_total_characters_and_a_long_text_goes_alone(server: EmbeddingsServer) -> None:
    texts = ["aaaa", "bbbb", "cc", "x" * 25, "dddd", "eeeeee", "ff"]
    with make(server, batch_size=100, max_batch_chars=10, concurrency=1) as embedder:
        vectors = embedder.embed(texts)
    assert_rows(vectors, texts)
    assert server.inputs() == [["aaaa", "bbbb", "cc"], ["x" * 25], ["dddd", "eeeeee"], ["ff"]]
    assert all(sum(map(len, batch)) <= 10 for batch in server.inputs() if len(batch) > 1)


def test_order_is_preserved_with_concurrent_batches_and_replies_sorted_differently(server: EmbeddingsServer) -> None:
    server.default = reversed_order()
    texts = [f"passage {i}" for i in range(37)]
    with make(server, batch_size=4, concurrency=4) as embedder:
        vectors = embedder.embed(texts)
    assert_rows(vectors, texts)
    assert len(server.requests) == 10
    assert sorted(t for batch in server.inputs() for t in batch) == sorted(texts)


def test_empty_input_makes_no_request_and_bad_inputs_are_type_errors(server: EmbeddingsServer) -> None:
    with make(server) as embedder:
        empty = embedder.embed([])
        assert empty.shape == (0, DIM) and empty.dtype == np.float32
        with pytest.raises(TypeError, match="not a single string"):
            embedder.embed("a bare string")
        with pytest.raises(TypeError, match=r"texts\[1\] is int"):
            embedder.embed(["fine", 3])  # pyright: ignore[reportArgumentType]
    assert server.requests == []


def test_a_zero_vector_stays_zero(server: EmbeddingsServer) -> None:
    with make(server) as embedder:
        vectors = embedder.embed(["", "something"])
    assert not vectors[0].any()
    assert math.isclose(float(np.linalg.norm(vectors[1])), 1.0, rel_tol=1e-6)


def test_send_dimensions_asks_the_server_for_that_many(server: EmbeddingsServer) -> None:
    server.dim = 32  # the model's native size; the request must ask for DIM
    with make(server, send_dimensions=True) as embedder:
        vectors = embedder.embed(["short"])
    assert_rows(vectors, ["short"])
    assert server.requests[0].body["dimensions"] == DIM


@pytest.mark.parametrize("form", ["base", "base/", "full"])
def test_identity_names_the_public_endpoint_model_and_dimensions_never_the_key(
    server: EmbeddingsServer, form: str
) -> None:
    url = {"base": server.base_url, "base/": server.base_url + "/", "full": server.url}[form]
    with make(server, endpoint=url) as embedder:
        assert embedder.kind == "openai" and embedder.dim == DIM
        assert embedder.identity() == {"kind": "openai", "endpoint": server.url, "model": MODEL, "dimensions": DIM}
        assert API_KEY not in repr(embedder) and API_KEY not in str(embedder.identity())
        assert_rows(embedder.embed(["hello"]), ["hello"])
    assert server.requests[0].path == "/v1/embeddings"


def test_credentials_and_query_in_the_url_stay_out_of_identity(server: EmbeddingsServer) -> None:
    url = f"http://user:pw-s3cret@127.0.0.1:{server.port}/v1?api-version=2024"
    assert embeddings_url(url).endswith("/v1/embeddings?api-version=2024")
    with make(server, endpoint=url) as embedder:
        assert embedder.identity()["endpoint"] == server.url
        embedder.embed(["hello"])
    assert server.requests[0].path == "/v1/embeddings?api-version=2024"


def test_usage_counts_requests_retries_texts_and_tokens(server: EmbeddingsServer) -> None:
    server.push(status(503))
    with make(server, batch_size=2, concurrency=1) as embedder:
        assert embedder.usage == {"requests": 0, "retries": 0, "texts": 0, "prompt_tokens": 0, "total_tokens": 0}
        embedder.embed(TEXTS[:3])
        embedder.embed(["one two three"])
        used = sum(tokens(t) for t in TEXTS[:3]) + 3
        assert embedder.usage == {"requests": 4, "retries": 1, "texts": 4, "prompt_tokens": used, "total_tokens": used}


# --- retries ------------------------------------------------------------------------------------------------


def test_429_is_retried_after_the_wait_retry_after_asks_for(server: EmbeddingsServer) -> None:
    server.push(status(429, retry_after=0.4))
    retries = Retries()
    with make(server, on_retry=retries) as embedder:
        assert_rows(embedder.embed(["rate limited"]), ["rate limited"])
        assert embedder.usage["retries"] == 1 and embedder.usage["requests"] == 2
    assert [(a, d) for a, d, _ in retries] == [(1, 0.4)]
    assert "HTTP 429" in retries[0][2]
    [gap] = server.gaps()
    assert 0.4 - 0.01 <= gap < 0.4 + TOLERANCE_S


def test_5xx_is_retried_within_policy(server: EmbeddingsServer) -> None:
    server.push(status(500), status(503))
    with make(server) as embedder:
        assert_rows(embedder.embed(["flaky"]), ["flaky"])
    assert len(server.requests) == 3


def test_5xx_gives_up_after_max_attempts_naming_the_endpoint(server: EmbeddingsServer) -> None:
    server.default = status(503)
    with make(server, backoff=FAST) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(["down"])
    error = caught.value
    assert len(server.requests) == FAST.max_attempts
    assert error.attempts == FAST.max_attempts and error.retryable and error.status == 503
    assert str(error).startswith(server.url + ": gave up after 4 attempts")
    assert "HTTP 503" in str(error)


@pytest.mark.parametrize("code", [400, 401])
def test_other_4xx_fail_at_once_and_the_key_is_redacted(server: EmbeddingsServer, code: int) -> None:
    echoed = {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error"}}
    server.push(status(code, body=echoed))
    with make(server) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(["nope"])
    assert len(server.requests) == 1
    error = caught.value
    assert error.status == code and not error.retryable and error.attempts == 1
    message = str(error)
    assert message.startswith(server.url + f": HTTP {code}")
    assert "not retryable" in message and "Incorrect API key provided: ***" in message
    assert API_KEY not in message and API_KEY not in error.problem


def test_a_truncated_body_is_retried(server: EmbeddingsServer) -> None:
    server.push(truncated())
    with make(server) as embedder:
        assert_rows(embedder.embed(["cut"]), ["cut"])
    assert len(server.requests) == 2


def test_a_body_that_is_not_json_is_retried_then_fails_naming_the_endpoint(server: EmbeddingsServer) -> None:
    server.default = status(200, body=b"<html>gateway says hi</html>")
    with make(server) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(["html"])
    assert len(server.requests) == FAST.max_attempts
    assert str(caught.value).startswith(server.url + ": gave up")
    assert "invalid JSON body" in str(caught.value)


def test_a_slow_reply_times_out_and_is_retried(server: EmbeddingsServer) -> None:
    server.push(slow(1.0))
    with make(server, timeout_s=0.3) as embedder:
        assert_rows(embedder.embed(["slow"]), ["slow"])
    assert len(server.requests) == 2


def test_a_timeout_gives_up_naming_the_endpoint(server: EmbeddingsServer) -> None:
    server.push(slow(1.0))
    with (
        make(server, timeout_s=0.3, backoff=Backoff(max_attempts=1)) as embedder,
        pytest.raises(EndpointError) as caught,
    ):
        embedder.embed(["slow"])
    assert str(caught.value).startswith(server.url + ": ") and "ReadTimeout" in str(caught.value)
    assert caught.value.status is None


# --- replies of the wrong shape: not retried ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "problem"),
    [
        (wrong_dim(12), f"returned 12-dimensional vectors, expected {DIM}"),
        (wrong_count(-1), "returned 1 embeddings for 2 inputs"),
        (wrong_count(+1), "returned 3 embeddings for 2 inputs"),
        (bad_value("0.5"), "data[0].embedding has non-numeric components"),
        (bad_value(float("nan")), "data[0].embedding has non-finite components"),
        (bad_value(float("inf")), "data[0].embedding has non-finite components"),
        (status(200, body={"object": "list"}), "JSON body has no data list"),
        (status(200, body=[1, 2]), "JSON body has no data list"),
        (status(200, body={"data": [{"index": 0, "embedding": "AAAA"}, {}]}), "is a string (base64?)"),
        (
            status(200, body={"data": [{"index": 1, "embedding": [0.0] * DIM}] * 2}),
            "data[1].index is 1, not a distinct index in 0..1",
        ),
    ],
    ids=lambda v: v.kind if hasattr(v, "kind") else None,
)
def test_a_reply_of_the_wrong_shape_fails_at_once_naming_the_endpoint(
    server: EmbeddingsServer, behaviour: Any, problem: str
) -> None:
    server.push(behaviour)
    with make(server) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(["first text", "second text"])
    assert len(server.requests) == 1
    message = str(caught.value)
    assert message.startswith(server.url + ": HTTP 200 with InvalidResponse: ")
    assert problem in message and "not retryable" in message
    assert API_KEY not in message


# --- concurrency --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 3])
def test_at_most_concurrency_requests_are_in_flight(server: EmbeddingsServer, concurrency: int) -> None:
    server.default = slow(0.15)
    texts = [f"chunk {i}" for i in range(8)]
    with make(server, batch_size=1, concurrency=concurrency) as embedder:
        assert_rows(embedder.embed(texts), texts)
    assert len(server.requests) == 8
    assert server.max_in_flight == concurrency  # <= the bound, and > 1 when allowed


def test_a_failing_batch_stops_the_others_from_starting(server: EmbeddingsServer) -> None:
    server.default = slow(0.1)
    server.push(status(400))
    texts = [f"chunk {i}" for i in range(12)]
    with make(server, batch_size=1, concurrency=2) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(texts)
    assert caught.value.status == 400
    assert len(server.requests) <= 4  # the one in flight finishes; queued batches never start
