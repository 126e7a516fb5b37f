"""What every request meets before a route: a body-size limit per route, and a quiet end for clients that leave.

`BodyLimit` refuses a body over its route's limit before the route reads it: at once (413) when the
`Content-Length` says so, and by counting the bytes as they arrive otherwise (chunked bodies), so an unsigned
200 MB body costs the server nothing but the bytes of one chunk. Limits are per route because a Slack click is a
few kilobytes and a landing request carries documents.

`Disconnects` turns a client that disconnected while its body was being read into one INFO line. Security
headers are `runtime_ops.api.headers`; read deadlines (slow clients) are `runtime_ops.api.server`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from starlette.requests import ClientDisconnect

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


class Disconnects:
    """A client that goes away before its request was read is one INFO line, not an ERROR with a traceback:
    nothing failed on the server's side, and there is no one left to answer."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            client = scope.get("client")
            log.info(
                "client disconnected before its request was read",
                extra={
                    "path": scope.get("path", ""),
                    "method": scope.get("method", ""),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                },
            )
