"""A local OpenAI-compatible chat-completions server that misbehaves on request, for testing HTTP clients.

    with FaultServer() as server:
        server.push(status(429, retry_after=1), status(500), slow(2.0), truncated(), reset())
        client = ChatEndpoint(server.base_url)  # http://127.0.0.1:<port>/v1
        ...
        server.gaps()  # seconds between consecutive request arrivals

Each POST to `/v1/chat/completions` (or `/chat/completions`) takes the next behaviour from the queue; when the queue is
empty it uses `server.default` (`ok()` unless set). Other paths get 404. Behaviours:

- `ok(text)`: 200 with a chat-completions body whose `choices[0].message.content` is `text`;
- `status(code, retry_after=None, body=None)`: that status, an optional `Retry-After`, a JSON error body;
- `slow(seconds, then=None)`: wait, then behave like `then` (default `ok()`);
- `truncated(full_length=False)`: 200, `Content-Type: application/json`, the body cut in half; the
  `Content-Length` matches the bytes sent (a well-framed but invalid JSON body) unless `full_length=True`
  (it then announces the whole body and closes the connection early);
- `reset()`: read the request, then close the socket abruptly with no response (SO_LINGER 0 -> TCP RST).

Every request is recorded (`server.requests`) with its monotonic arrival time, path, headers and body;
`server.max_in_flight` is the most requests handled at once. Subclasses serve another API by overriding
`routes` and `reply()` (the 200 body of `ok` and of behaviour kinds they add), e.g. `EmbeddingsServer`.
The server runs on 127.0.0.1, port 0, in a daemon thread; `stop()` (or leaving the `with`) shuts it down.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

HOST = "127.0.0.1"
CHAT_PATH = "/chat/completions"
ROUTES = frozenset({"/v1" + CHAT_PATH, CHAT_PATH})


@dataclass(frozen=True)
class Behaviour:
    kind: str  # "ok" | "status" | "slow" | "truncated" | "reset" | a kind a subclass's reply() knows
    text: str = "stub answer [1]"
    code: int = 200
    retry_after: str | None = None
    body: Any = None
    seconds: float = 0.0
    then: Behaviour | None = None
    full_length: bool = False


def ok(text: str = "stub answer [1]") -> Behaviour:
    return Behaviour("ok", text=text)


def status(code: int, retry_after: float | str | None = None, body: Any = None) -> Behaviour:
    """Answer `code`; `retry_after` becomes the `Retry-After` header as given (seconds or an HTTP-date)."""
    if body is None:
        body = {"error": {"message": f"injected HTTP {code}", "type": "fault_server", "code": code}}
    header = None if retry_after is None else (retry_after if isinstance(retry_after, str) else f"{retry_after:g}")
    return Behaviour("status", code=code, retry_after=header, body=body)


def slow(seconds: float, then: Behaviour | None = None) -> Behaviour:
    return Behaviour("slow", seconds=seconds, then=then or ok())


def truncated(full_length: bool = False) -> Behaviour:
    return Behaviour("truncated", full_length=full_length)


def reset() -> Behaviour:
    return Behaviour("reset")


@dataclass(frozen=True)
class Request:
    """One request received, in arrival order."""

    index: int
    arrived: float  # time.monotonic() when its request line and headers were read
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw bytes when not JSON
    behaviour: str  # the behaviour kind applied ("not_found" for an unknown path)


def completion_body(text: str, model: str = "fault-server") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server  # pyright: ignore[reportIncompatibleVariableOverride]  # always our _Server (typeshed: BaseServer)
    protocol_version = "HTTP/1.1"  # keep-alive like a real API; behaviours that break a connection close it

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        arrived = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        path = self.path.split("?", 1)[0]
        owner = self.server.owner
        routed = self.command == "POST" and path.rstrip("/") in owner.routes
        behaviour = owner._take(routed, arrived, self.command, self.path, dict(self.headers), body)
        try:
            if behaviour is None:
                self._send_json(404, {"error": {"message": f"no route {self.command} {path}", "type": "not_found"}})
                return
            self._apply(behaviour, body)
        finally:
            owner._done()

    def _apply(self, behaviour: Behaviour, request: Any) -> None:
        if behaviour.kind == "slow":
            if self.server.owner._stopping.wait(behaviour.seconds):
                return self._abort()
            assert behaviour.then is not None
            return self._apply(behaviour.then, request)
        if behaviour.kind == "status":
            extra = {"Retry-After": behaviour.retry_after} if behaviour.retry_after is not None else {}
            return self._send_json(behaviour.code, behaviour.body, extra)
        if behaviour.kind == "truncated":
            full = json.dumps(self.server.owner.reply(ok("this answer is cut off"), request)).encode()
            cut = full[: len(full) // 2]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(full) if behaviour.full_length else len(cut)))
            if behaviour.full_length:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(cut)
            self.wfile.flush()
            self.close_connection = True
            return None
        if behaviour.kind == "reset":
            return self._abort()
        return self._send_json(200, self.server.owner.reply(behaviour, request))  # "ok" and subclass kinds

    def _send_json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        with contextlib.suppress(OSError):  # the client may have given up (timed out) already
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    def _abort(self) -> None:
        """Close the connection with a TCP RST and no response."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, owner: FaultServer) -> None:
        self.owner = owner
        super().__init__((HOST, 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:  # aborted connections are expected
        pass

    def shutdown_request(self, request: Any) -> None:
        with contextlib.suppress(OSError):
            super().shutdown_request(request)


@dataclass
class FaultServer:
    """A scriptable chat-completions server on 127.0.0.1 (see the module docstring)."""

    routes: ClassVar[frozenset[str]] = ROUTES
    name: ClassVar[str] = "fault-server"

    default: Behaviour = field(default_factory=ok)
    requests: list[Request] = field(default_factory=list, init=False)
    in_flight: int = field(default=0, init=False)
    max_in_flight: int = field(default=0, init=False)
    _queue: deque[Behaviour] = field(default_factory=deque, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _server: _Server | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> Self:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes `slow` handlers
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # addresses ---------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FaultServer is not running: call start() or use it as a context manager")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, `http://127.0.0.1:<port>/v1`."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def url(self) -> str:
        """The full chat-completions URL."""
        return self.base_url + CHAT_PATH

    # scripting and records ---------------------------------------------------------------------------------
    def push(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._queue.extend(behaviours)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.max_in_flight = self.in_flight

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def arrivals(self) -> list[float]:
        with self._lock:
            return [r.arrived for r in self.requests]

    def gaps(self) -> list[float]:
        """Seconds between consecutive request arrivals."""
        times = self.arrivals()
        return [b - a for a, b in itertools.pairwise(times)]

    def _take(
        self, routed: bool, arrived: float, method: str, path: str, headers: dict[str, str], body: Any
    ) -> Behaviour | None:
        """Record a request and pick its behaviour (None: unknown route), atomically."""
        with self._lock:
            behaviour = (self._queue.popleft() if self._queue else self.default) if routed else None
            kind = behaviour.kind if behaviour is not None else "not_found"
            self.requests.append(Request(len(self.requests), arrived, method, path, headers, body, kind))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return behaviour

    def _done(self) -> None:
        """A request taken by `_take` has been answered (or its connection dropped)."""
        with self._lock:
            self.in_flight -= 1

    def reply(self, behaviour: Behaviour, request: Any) -> Any:
        """The 200 JSON body for `behaviour` (`ok`; subclasses add kinds) answering the parsed `request`."""
        if behaviour.kind != "ok":
            raise AssertionError(f"unknown behaviour {behaviour.kind!r}")
        model = request.get("model", "fault-server") if isinstance(request, dict) else "fault-server"
        return completion_body(behaviour.text, model)
