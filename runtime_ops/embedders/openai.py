"""An embedder that calls an OpenAI-compatible embeddings endpoint (`POST {base}/embeddings`).

The LSA embedder is trained here; this one lets the pipeline use a pretrained model served elsewhere
(OpenAI, vLLM, TEI, Ollama, ...) behind the same `embed(texts) -> normalised float32 rows` contract:

    with OpenAIEmbedder("http://embed:8080/v1", "bge-small-en", 384, api_key=key) as embedder:
        vectors = embedder.embed(chunks)

Texts go out in batches bounded by count (`batch_size`) and by total characters (`max_batch_chars`), at
most `concurrency` requests in flight over one shared connection pool, and come back in input order.
Each request has a timeout (connect <= 5 s) and runs under the project's `Backoff` policy through
`call_with_retries`, like `ChatEndpoint`: 429/5xx, connection errors, timeouts and truncated JSON are
retried (honouring `Retry-After`); other 4xx and well-formed replies of the wrong shape or dimension fail
at once. Failures raise `EndpointError`, whose message names the endpoint URL and never the API key.

`identity()` (endpoint, model, dimensions) is what identifies the embedding version: vectors from
different identities are not comparable.
"""

from __future__ import annotations

import contextvars
import json
import math
import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from runtime_ops.http.client import EndpointError, call_with_retries
from runtime_ops.http.retry import Backoff, InvalidResponse
from runtime_ops.http.urls import endpoint_url, public_url
from runtime_ops.observability.tracing import client_span

__all__ = ["EndpointError", "OpenAIEmbedder", "embeddings_url"]

_SUFFIX = "/embeddings"
_CONNECT_TIMEOUT_S = 5.0
_USAGE_KEYS = ("requests", "retries", "texts", "prompt_tokens", "total_tokens")


def embeddings_url(url: str) -> str:
    """The embeddings URL for a base (`http://host/v1`) or a full `.../embeddings` URL."""
    return endpoint_url(url, _SUFFIX, "embeddings endpoint")


class _Cancelled(Exception):
    """Another batch of the same `embed()` call failed: stop before sending this one (again)."""


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _is_number(value: object) -> bool:
    return type(value) is float or type(value) is int  # not bool, not numeric strings


def _normalise(rows: np.ndarray) -> np.ndarray:
    """float32 rows scaled to unit L2 norm (zero rows stay zero); computed in float64, scaled by the row's
    largest magnitude first so huge components neither overflow nor lose the direction."""
    scale = np.max(np.abs(rows), axis=1, keepdims=True)
    scaled = np.divide(rows, scale, out=np.zeros_like(rows), where=scale > 0)
    norms = np.linalg.norm(scaled, axis=1, keepdims=True)
    unit = np.divide(scaled, norms, out=np.zeros_like(scaled), where=norms > 0)
    return unit.astype(np.float32)


def parse_embeddings(response: httpx.Response, count: int, dim: int) -> tuple[np.ndarray, dict[str, int]]:
    """The (count, dim) float64 vectors of an embeddings reply, ordered by `data[i].index` (position when
    absent), and its token usage. Undecodable JSON is transient (a cut-off body); JSON of the wrong shape,
    count or dimension, or with non-numeric or non-finite components, is not (asking again gets the same)."""
    try:
        body: Any = json.loads(response.content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidResponse(f"invalid JSON body ({len(response.content)} bytes): {exc}", transient=True) from exc
    items = body.get("data") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise InvalidResponse("JSON body has no data list", transient=False)
    if len(items) != count:
        raise InvalidResponse(f"returned {len(items)} embeddings for {count} inputs", transient=False)
    vectors = np.zeros((count, dim), dtype=np.float64)
    seen = [False] * count
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidResponse(f"data[{position}] is {type(item).__name__}, not an object", transient=False)
        index = item.get("index", position)
        if type(index) is not int or not 0 <= index < count or seen[index]:
            raise InvalidResponse(
                f"data[{position}].index is {index!r}, not a distinct index in 0..{count - 1}", transient=False
            )
        seen[index] = True
        embedding = item.get("embedding")
        if isinstance(embedding, str):
            raise InvalidResponse(f"data[{position}].embedding is a string (base64?), not a list", transient=False)
        if not isinstance(embedding, list):
            kind = type(embedding).__name__
            raise InvalidResponse(f"data[{position}].embedding is {kind}, not a list", transient=False)
        if len(embedding) != dim:
            raise InvalidResponse(f"returned {len(embedding)}-dimensional vectors, expected {dim}", transient=False)
        if not all(_is_number(x) for x in embedding):
            raise InvalidResponse(f"data[{position}].embedding has non-numeric components", transient=False)
        row = np.asarray(embedding, dtype=np.float64)
        if not np.isfinite(row).all():
            raise InvalidResponse(f"data[{position}].embedding has non-finite components", transient=False)
        vectors[index] = row
    usage: dict[str, int] = {}
    raw_usage = body.get("usage")
    if isinstance(raw_usage, dict):
        for key in ("prompt_tokens", "total_tokens"):
            value = raw_usage.get(key)
            if type(value) is int and value >= 0:
                usage[key] = value
    return vectors, usage


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint (see the module docstring). Safe to share between
    threads for `embed()` calls; `close()` releases the connection pool."""

    kind = "openai"

    def __init__(
        self,
        endpoint: str,
        model: str,
        dimensions: int,
        *,
        api_key: str | None = None,
        batch_size: int = 64,
        max_batch_chars: int = 100_000,
        concurrency: int = 4,
        timeout_s: float = 30.0,
        backoff: Backoff | None = None,
        send_dimensions: bool = False,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
        on_retry: Callable[[int, float, str], None] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
        self.url = embeddings_url(endpoint)
        self.what = public_url(self.url)
        self.model = model
        self._dim = _positive_int("dimensions", dimensions)
        self.batch_size = _positive_int("batch_size", batch_size)
        self.max_batch_chars = _positive_int("max_batch_chars", max_batch_chars)
        self.concurrency = _positive_int("concurrency", concurrency)
        self.timeout_s = float(timeout_s)
        self.backoff = backoff if backoff is not None else Backoff()
        self.send_dimensions = send_dimensions
        self._api_key = api_key or None
        self._rng = rng
        self._on_retry = on_retry
        # Scrubbed from every error message: the key, and a password embedded in the URL.
        self._secrets = tuple(s for s in (self._api_key, urlsplit(self.url).password) if s)
        self._lock = threading.Lock()
        self._usage: dict[str, int] = dict.fromkeys(_USAGE_KEYS, 0)
        headers = {"Accept": "application/json", "User-Agent": "runtime-ops"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout_s, connect=min(_CONNECT_TIMEOUT_S, self.timeout_s)),
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
            headers=headers,
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder({self.what!r}, model={self.model!r}, dimensions={self._dim}, "
            f"batch_size={self.batch_size}, concurrency={self.concurrency})"
        )

    # the embedder contract -----------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    def identity(self) -> dict[str, str | int]:
        """What identifies this embedding version (never the key): the public endpoint, model, dimensions."""
        return {"kind": self.kind, "endpoint": self.what, "model": self.model, "dimensions": self._dim}

    @property
    def usage(self) -> dict[str, int]:
        """Cumulative counters: HTTP requests sent (retries included), retries, texts embedded, and the
        prompt/total tokens the endpoint reported."""
        with self._lock:
            return dict(self._usage)

    def embed(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """float32 (len(texts), dim) rows, L2-normalised (zero rows stay zero), in input order.
        `batch_size` overrides the constructor's for this call. Raises `EndpointError` when a batch fails."""
        if isinstance(texts, str | bytes):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        if not items:
            return out
        size = self.batch_size if batch_size is None else _positive_int("batch_size", batch_size)
        batches = self._batches(items, size)
        cancel = threading.Event()
        if len(batches) == 1 or self.concurrency == 1:
            for start, batch in batches:
                out[start : start + len(batch)] = self._embed_batch(batch, cancel)
            return out
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches)), thread_name_prefix="embed-openai")
        try:
            futures: dict[Future[np.ndarray], tuple[int, int]] = {}
            for start, batch in batches:
                context = contextvars.copy_context()  # spans in workers join the caller's trace
                futures[pool.submit(context.run, self._embed_batch, batch, cancel)] = (start, len(batch))
            for future in as_completed(futures):
                start, count = futures[future]
                out[start : start + count] = future.result()
        except BaseException:
            cancel.set()  # batches waiting to retry stop; queued ones never start
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return out

    # internals ---------------------------------------------------------------------------------------------
    def _batches(self, texts: list[str], size: int) -> list[tuple[int, list[str]]]:
        """(start index, texts) chunks of at most `size` texts and `max_batch_chars` characters; a text
        longer than the limit goes alone."""
        batches: list[tuple[int, list[str]]] = []
        start, batch, chars = 0, [], 0
        for i, text in enumerate(texts):
            if batch and (len(batch) >= size or chars + len(text) > self.max_batch_chars):
                batches.append((start, batch))
                start, batch, chars = i, [], 0
            batch.append(text)
            chars += len(text)
        batches.append((start, batch))
        return batches

    def _embed_batch(self, batch: list[str], cancel: threading.Event) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.send_dimensions:
            body["dimensions"] = self._dim

        def send() -> httpx.Response:
            if cancel.is_set():
                raise _Cancelled
            with self._lock:
                self._usage["requests"] += 1
            return self._traced_post(body, len(batch))

        def wait(seconds: float) -> None:
            cancel.wait(seconds)  # wakes early once another batch of the call has failed

        def on_retry(attempt: int, delay: float, problem: str) -> None:
            with self._lock:
                self._usage["retries"] += 1
            if self._on_retry is not None:
                self._on_retry(attempt, delay, problem)

        response = call_with_retries(
            send,
            what=self.what,
            backoff=self.backoff,
            sleep=wait,
            rng=self._rng,
            on_retry=on_retry,
            check=lambda r: parse_embeddings(r, len(batch), self._dim),
            redact=self._secrets,
        )
        vectors, usage = parse_embeddings(response, len(batch), self._dim)
        with self._lock:
            self._usage["texts"] += len(batch)
            for key, value in usage.items():
                self._usage[key] += value
        return _normalise(vectors)

    def _traced_post(self, body: dict[str, Any], count: int) -> httpx.Response:
        """One attempt, as a CLIENT span (a retried call is one span per attempt)."""
        attributes: dict[str, Any] = {
            "gen_ai.request.model": self.model,
            "gen_ai.operation.name": "embeddings",
            "runtime_ops.embeddings.inputs": count,
        }
        with client_span("POST", method="POST", url=self.url, **attributes) as span:
            response = self._client.post(self.url, json=body)
            span.status_code(response.status_code)
            return response

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
