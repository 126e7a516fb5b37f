"""What every request meets before a route: a body-size limit per route, and security headers on the pages.

`BodyLimit` refuses a body over its route's limit before the route reads it: at once (413) when the
`Content-Length` says so, and by counting the bytes as they arrive otherwise (chunked bodies), so an unsigned
200 MB body costs the server nothing but the bytes of one chunk. Limits are per route because a Slack click is a
few kilobytes and a landing request carries documents.

`PageHeaders` adds to the approval pages what a page carrying a decision needs: no caching (`no-store`), no
referrer (the URL holds the signed token), no framing (clickjacking), a content policy allowing only the page's
own inline style and a form posting back to itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException

log = logging.getLogger("runtime_ops.api.guards")

KIB, MIB = 1024, 1024 * 1024
# (path prefix, largest body accepted), the first match wins.
ROUTE_LIMITS: tuple[tuple[str, int], ...] = (
    ("/webhooks/landing", 32 * MIB),  # documents inline; bigger ones belong in the bucket
    ("/alerts/alertmanager", 16 * MIB),  # Alertmanager groups up to thousands of alerts in one webhook
    ("/slack/interactions", 256 * KIB),  # one block_actions payload
    ("/approvals/", 16 * KIB),  # a decision and its reason
)
DEFAULT_LIMIT = 64 * KIB  # /api/* queries and everything else

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]


def limit_for(path: str) -> int:
    return next((limit for prefix, limit in ROUTE_LIMITS if path.startswith(prefix)), DEFAULT_LIMIT)


class BodyLimit:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = limit_for(path)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _refuse(send, path, 400, "Content-Length is not a number")
                return
            if size > limit:
                await _refuse(send, path, 413, f"body of {size} bytes, over this route's limit of {limit}")
                return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    log.info("request refused: body over the limit", extra={"path": path, "http_status": 413})
                    raise HTTPException(413, f"body over this route's limit of {limit} bytes")
            return message

        await self.app(scope, counted, send)


async def _refuse(send: Send, path: str, status: int, reason: str) -> None:
    log.info("request refused: %s", reason, extra={"path": path, "http_status": status})
    body = json.dumps({"detail": reason}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


PAGE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (
        b"content-security-policy",
        # img-src: the pages' icon is an inline data: URL (there is no unauthenticated /favicon.ico to fetch).
        b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; "
        b"base-uri 'none'",
    ),
)


class PageHeaders:
    def __init__(self, app: Any, prefix: str = "/approvals/") -> None:
        self.app, self.prefix = app, prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith(self.prefix):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in PAGE_HEADERS}
                kept = [(n, v) for n, v in message.get("headers", []) if n.lower() not in names]
                message = {**message, "headers": [*kept, *PAGE_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
