"""`ChatClassifier`: labels items through an OpenAI-compatible chat-completions endpoint.

Every call has a timeout (connect <= 5 s) and runs under a `Backoff` policy (`runtime_ops.http`): 429, 5xx,
connection errors, timeouts and truncated JSON are retried with capped exponential backoff and full jitter,
honouring `Retry-After`; other 4xx and replies of the wrong shape fail at once with an `EndpointError` naming the
endpoint (never the key). Each request carries `X-Client-Request-Id: <item id>:<digest prefix>`, so the endpoint's
logs tie its calls to items. Safe to share between threads (httpx.Client is).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from runtime_ops.http.chat import chat_completions_url, chat_reply
from runtime_ops.http.client import call_with_retries
from runtime_ops.http.retry import Backoff
from runtime_ops.http.urls import public_url
from runtime_ops.inference.completion import Completion
from runtime_ops.inference.costs import Usage
from runtime_ops.inference.prompts import request_digest
from runtime_ops.observability.tracing import client_span

log = logging.getLogger(__name__)

ITEM_HEADER = "X-Client-Request-Id"
DEFAULT_BACKOFF = Backoff(base_s=0.5, factor=2.0, max_delay_s=20.0, max_attempts=6, jitter="full", max_total_s=120.0)


class ChatClassifier:
    def __init__(
        self,
        url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.url = chat_completions_url(url)
        self.what = public_url(self.url)
        self.model = model
        self.backoff = backoff
        self._sleep = sleep
        self._api_key = api_key or None
        headers = {"Accept": "application/json", "User-Agent": "runtime-ops"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)), headers=headers, follow_redirects=False
        )

    def __repr__(self) -> str:  # never the key
        return f"ChatClassifier({self.what!r}, model={self.model!r})"

    def complete(self, request: dict[str, Any], *, item_id: str) -> Completion:
        body = {"model": self.model, **request}
        headers = {ITEM_HEADER: f"{quote(item_id, safe='')}:{request_digest(request)[:12]}"}
        response = call_with_retries(
            lambda: self._post(body, headers),
            what=f"{self.what} (item {item_id!r})",
            backoff=self.backoff,
            sleep=self._sleep,
            check=chat_reply,
            redact=(self._api_key,) if self._api_key else (),
        )
        reply = chat_reply(response)
        if reply.usage is None:
            log.warning("%s: the reply for item %r reports no token usage; counted as 0 tokens", self.what, item_id)
        return Completion(
            reply.content, Usage(*reply.usage) if reply.usage else Usage(), usage_reported=bool(reply.usage)
        )

    def _post(self, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        with client_span("POST", method="POST", url=self.url, **{"gen_ai.request.model": self.model}) as span:
            response = self._client.post(self.url, json=body, headers=headers)
            span.status_code(response.status_code)
            return response

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ChatClassifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
