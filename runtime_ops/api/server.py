"""Serving the ops API with uvicorn: `serve` is what `runtime-ops serve` runs; `server_config` builds the same
configuration for tests that serve the app in a thread.

What uvicorn is told, and why:

- `proxy_headers=False`: uvicorn would otherwise believe `X-Forwarded-For` from 127.0.0.1 (its own default for
  FORWARDED_ALLOW_IPS), so any local client, or a proxy on the same host passing the header through, could pick
  the address the refusal limiter counts against. The app applies proxy headers itself, and only from the proxies
  `FORWARDED_ALLOW_IPS` lists (`runtime_ops.api.app`).
- `http=`: a subclass of uvicorn's httptools protocol with the read deadlines uvicorn lacks (it has a keep-alive
  timeout between requests, none while one is being read): a client that sends its headers or its body a byte at
  a time would hold a connection, and a slot of the process, for ever.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from runtime_ops.errors import UserError
from runtime_ops.settings import Settings

log = logging.getLogger("runtime_ops.api.server")

_SLOW = b"the request did not arrive in time; send it whole, without pauses"
_TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_SLOW), _SLOW)
)


class ReadDeadlines(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request does not arrive in time: its headers
    within `header_timeout` seconds of the connection or of the request's first byte, its body within
    `body_timeout` seconds after the headers. None: no deadline. Subclassed per server by `read_deadlines`."""

    header_timeout: float | None = 10.0
    body_timeout: float | None = 30.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm("headers", self.header_timeout)  # a connection that sends nothing is a slow request too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the next request of a kept-alive connection: timed from its first byte
            self._arm("headers", self.header_timeout)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        self._arm("body", self.body_timeout)  # disarmed at once by on_message_complete when there is no body

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _arm(self, phase: str, seconds: float | None) -> None:
        self._disarm()
        if seconds is not None:
            self._deadline = self.loop.call_later(seconds, self._expire, phase, seconds)

    def _disarm(self) -> None:
        deadline, self._deadline = getattr(self, "_deadline", None), None
        if deadline is not None:
            deadline.cancel()

    def _expire(self, phase: str, seconds: float) -> None:
        self._deadline = None
        # A connection handed to another protocol (an upgrade) or already closing is not ours to close.
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "-"
        log.info(
            "closed a connection whose request %s did not arrive within %g s",
            phase,
            seconds,
            extra={"client": client, "phase": phase, "http_status": 408},
        )
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_TIMEOUT_408)
        self.transport.close()


def read_deadlines(settings: Settings) -> type[ReadDeadlines]:
    """The protocol class with the settings' deadlines (uvicorn instantiates the class per connection)."""

    def seconds(value: Any) -> float | None:
        return value.total_seconds() if value is not None else None

    return type(
        "ReadDeadlines",
        (ReadDeadlines,),
        {"header_timeout": seconds(settings.header_timeout), "body_timeout": seconds(settings.body_timeout)},
    )


def server_config(app: Any, settings: Settings, *, host: str, port: int, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for the ops API; `options` (log_level, access_log, log_config, ...) pass through."""
    return uvicorn.Config(app, host=host, port=port, http=read_deadlines(settings), proxy_headers=False, **options)


def serve(app: Any, settings: Settings, sock: socket.socket, *, log_level: str) -> None:
    """Serve `app` on `sock` (from `listen`, bound before the app was made)."""
    host, port = sock.getsockname()[:2]
    # log_config=None: uvicorn keeps its hands off logging; its loggers go through ours (configured by the CLI).
    config = server_config(app, settings, host=host, port=port, log_level=log_level, access_log=False, log_config=None)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn shuts down gracefully on Ctrl-C, then raises the signal again for its caller: it is how an
        # operator stops the server, not a failure (and not a traceback on their terminal).
        log.info("the ops API stopped on Ctrl-C")


class AddressUnavailable(UserError):
    """The ops API's address cannot be listened on (in use, not this machine's, not allowed)."""


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the app is made: an address in use is one line and a failing status, not
    an application (and its state store) started and stopped again with uvicorn's error in the log and status 0."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise AddressUnavailable(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --host/--port or stop what "
            "listens there"
        ) from None
    sock.set_inheritable(True)
    return sock
