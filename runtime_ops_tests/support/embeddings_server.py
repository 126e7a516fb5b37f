"""A local OpenAI-compatible embeddings server that misbehaves on request, for testing `OpenAIEmbedder`.

    with EmbeddingsServer(dim=8) as server:
        server.push(status(429, retry_after=0.3), status(503), wrong_dim(12), slow(2.0))
        embedder = OpenAIEmbedder(server.base_url, "test-model", 8)  # http://127.0.0.1:<port>/v1
        ...
        expected_vector("some text", 8)  # what the server answers for that text (not normalised)

It is a `FaultServer` (same queue, records, `max_in_flight`, and the `status`, `slow`, `truncated`, `reset`
behaviours) routed at `POST /v1/embeddings` (or `/embeddings`). `ok()` answers every input with
`expected_vector(text, dim)` (a request's `dimensions` field, when sent, overrides `dim`), sorted by index,
with a `usage` object counting whitespace-separated words as tokens. Embeddings-specific behaviours:

- `reversed_order()`: a correct reply with `data` listed last index first;
- `wrong_dim(n)`: every vector has `n` components;
- `wrong_count(delta)`: `delta` more (or fewer, when negative) items than inputs;
- `bad_value(value)`: the first vector's first component replaced by `value` (a string, NaN, ...).

A malformed body is `status(200, body=b"<html>...")` or `status(200, body={"object": "list"})`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from runtime_ops_tests.support.fault_server import Behaviour, FaultServer, ok, reset, slow, status, truncated

__all__ = [
    "EmbeddingsServer",
    "bad_value",
    "expected_vector",
    "ok",
    "reset",
    "reversed_order",
    "slow",
    "status",
    "tokens",
    "truncated",
    "wrong_count",
    "wrong_dim",
]

EMBEDDINGS_PATH = "/embeddings"


def expected_vector(text: str, dim: int) -> list[float]:
    """The server's (unnormalised) vector for `text`: normal deviates seeded by its sha256. The empty text
    gets the zero vector."""
    if not text:
        return [0.0] * dim
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).normal(size=dim) * 3.0]


def tokens(text: str) -> int:
    """The token count the server reports for `text`."""
    return len(text.split())


def reversed_order() -> Behaviour:
    return Behaviour("reversed")


def wrong_dim(n: int) -> Behaviour:
    return Behaviour("wrong_dim", body=n)


def wrong_count(delta: int = -1) -> Behaviour:
    return Behaviour("wrong_count", body=delta)


def bad_value(value: Any) -> Behaviour:
    return Behaviour("bad_value", body=value)


@dataclass
class EmbeddingsServer(FaultServer):
    """A scriptable embeddings server on 127.0.0.1 (see the module docstring)."""

    routes: ClassVar[frozenset[str]] = frozenset({"/v1" + EMBEDDINGS_PATH, EMBEDDINGS_PATH})
    name: ClassVar[str] = "embeddings-server"

    dim: int = 8

    @property
    def url(self) -> str:
        """The full embeddings URL."""
        return self.base_url + EMBEDDINGS_PATH

    def inputs(self) -> list[list[str]]:
        """The `input` list of every request received, in arrival order."""
        with self._lock:
            return [list(r.body["input"]) if isinstance(r.body, dict) else [] for r in self.requests]

    def reply(self, behaviour: Behaviour, request: Any) -> Any:
        body = request if isinstance(request, dict) else {}
        raw = body.get("input", [])
        texts: list[str] = [raw] if isinstance(raw, str) else [str(t) for t in raw]
        dim = body.get("dimensions") or self.dim
        kind = behaviour.kind
        if kind == "wrong_dim":
            dim = behaviour.body
        items: list[dict[str, Any]] = [
            {"object": "embedding", "index": i, "embedding": expected_vector(text, dim)} for i, text in enumerate(texts)
        ]
        if kind == "reversed":
            items.reverse()
        elif kind == "wrong_count":
            delta: int = behaviour.body
            if delta < 0:
                items = items[:delta]
            else:
                extra = len(items)
                items += [
                    {"object": "embedding", "index": extra + j, "embedding": expected_vector(f"extra {j}", dim)}
                    for j in range(delta)
                ]
        elif kind == "bad_value":
            items[0]["embedding"][0] = behaviour.body
        elif kind not in ("ok", "wrong_dim"):
            raise AssertionError(f"unknown behaviour {kind!r}")
        used = sum(tokens(t) for t in texts)
        return {
            "object": "list",
            "data": items,
            "model": body.get("model", self.name),
            "usage": {"prompt_tokens": used, "total_tokens": used},
        }
