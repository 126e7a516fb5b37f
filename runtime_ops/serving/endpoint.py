"""Client for an OpenAI-compatible chat-completions endpoint (`RUNTIME_OPS_MODEL_ENDPOINT`), used by
`rag_answers` to write an answer grounded in the retrieved passages.

    with ChatEndpoint("http://llm:8000/v1", api_key=key) as llm:
        text = llm.answer("How is a model promoted?", passages)

Every call has a per-request timeout (connect <= 5 s) and runs under a `Backoff` policy: 429/5xx,
connection errors, timeouts and truncated JSON are retried (honouring `Retry-After`); other 4xx and
well-formed replies of the wrong shape fail at once. Failures raise `EndpointError`, whose message names
the endpoint URL (never the API key).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from runtime_ops.http.chat import chat_completions_url, chat_reply
from runtime_ops.http.client import EndpointError, call_with_retries
from runtime_ops.http.retry import Backoff
from runtime_ops.http.urls import public_url
from runtime_ops.observability.tracing import client_span

__all__ = ["SYSTEM_PROMPT", "ChatEndpoint", "EndpointError", "build_messages"]

SYSTEM_PROMPT = (
    "You answer questions about a document collection. Use only the numbered passages provided. "
    "Cite the passages you rely on by their numbers in square brackets, e.g. [1] or [2][3]. "
    "If the passages do not contain the answer, say that you do not know. Be concise."
)


def build_messages(question: str, passages: Sequence[str]) -> list[dict[str, str]]:
    numbered = "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(passages, start=1))
    context = numbered or "(no passages were retrieved)"
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Passages:\n\n{context}\n\nQuestion: {question.strip()}"},
    ]


class ChatEndpoint:
    """An OpenAI-compatible chat-completions endpoint with timeouts and retries. Not thread-safe to
    reconfigure, safe to share for calls (httpx.Client is)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        model: str = "runtime-ops-rag",
        timeout_s: float = 20.0,
        backoff: Backoff = Backoff(),
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[int, float, str], None] | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.url = chat_completions_url(url)
        self.what = public_url(self.url)
        self.model = model
        self.timeout_s = timeout_s
        self.backoff = backoff
        self._api_key = api_key or None
        self._rng = rng
        self._sleep = sleep
        self._on_retry = on_retry
        headers = {"Accept": "application/json", "User-Agent": "runtime-ops"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            headers=headers,
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"ChatEndpoint({self.what!r}, model={self.model!r}, timeout_s={self.timeout_s})"

    def answer(self, question: str, passages: Sequence[str], *, max_tokens: int = 300) -> str:
        """The model's answer to `question` from `passages` (cited as [1], [2], ...), stripped.
        Raises `EndpointError` when the endpoint fails, gives up after retries, or replies malformed."""
        return self.complete(build_messages(question, passages), max_tokens=max_tokens)

    def complete(self, messages: list[dict[str, str]], *, max_tokens: int = 300) -> str:
        """The model's reply to `messages` (temperature 0), stripped; `EndpointError` as for `answer`."""
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        response = call_with_retries(
            lambda: self._traced_post(body),
            what=self.what,
            backoff=self.backoff,
            sleep=self._sleep,
            rng=self._rng,
            on_retry=self._on_retry,
            check=chat_reply,
            redact=(self._api_key,) if self._api_key else (),
        )
        return chat_reply(response).content.strip()

    def _traced_post(self, body: dict[str, Any]) -> httpx.Response:
        """One attempt, as a CLIENT span (a retried call is one span per attempt)."""
        with client_span("POST", method="POST", url=self.url, **{"gen_ai.request.model": self.model}) as span:
            response = self._client.post(self.url, json=body)
            span.status_code(response.status_code)
            return response

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ChatEndpoint:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
