"""`runtime-ops serve` as a process of its own (uvicorn as it runs in production, real PostgreSQL): the refusal
limiter counts the socket's peer, not an `X-Forwarded-For` anyone can send (uvicorn believes it from loopback by
default); connections that send their headers or
body a byte at a time are closed after the read timeout while the API keeps answering; a client that disconnects
mid-body is one INFO line, without a traceback."""

from __future__ import annotations

import json
import math
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_ops.policies.refusals import RefusalPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import free_port, wait_until

TOKEN = "alert-token"


@dataclass
class Served:
    url: str
    port: int
    log: Path

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines the process wrote so far (a line that is not JSON is kept as its text)."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"message": line, "level": "raw"})
        return out


@pytest.fixture
def served(env: Any, postgres_url: str, tmp_path: Path) -> Iterator[Served]:
    env(
        database_url=postgres_url,
        RUNTIME_OPS_ALERT_TOKEN=TOKEN,
        RUNTIME_OPS_HEADER_TIMEOUT="2s",
        RUNTIME_OPS_BODY_TIMEOUT="2s",
        RUNTIME_OPS_LOG_FORMAT="json",
        FORWARDED_ALLOW_IPS=None,  # the default: no proxy is trusted
    )
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime_ops.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return web.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, 90, "runtime-ops serve to answer /healthz", log)
        yield Served(url, port, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_rotating_x_forwarded_for_does_not_escape_the_refusal_limit(served: Served, postgres_url: str) -> None:
    policy = RefusalPolicy()
    codes: list[int] = []
    started = time.monotonic()
    # Refused links, each "from" a new address, until the server says 429 (at most 200). The bucket refills at
    # `per_second` while they are sent, so on a slow machine it takes a few more than the burst.
    with httpx.Client(timeout=30) as client:
        while 429 not in codes and len(codes) < 200:
            forwarded = {"X-Forwarded-For": f"203.0.113.{len(codes) % 250}"}
            reply = client.post(f"{served.url}/approvals/not-a-token", data={"action": "approve"}, headers=forwarded)
            codes.append(reply.status_code)
    elapsed = time.monotonic() - started
    assert 429 in codes, f"{len(codes)} refused links with rotating X-Forwarded-For, none limited"
    allowed = policy.burst + math.ceil(elapsed * policy.per_second) + 1
    assert set(codes[:-1]) == {403} and len(codes) - 1 <= allowed, (codes, elapsed)
    # The audit names the socket's peer, never an address the client wrote.
    store = open_store(postgres_url, get_settings(), pipeline=None)
    try:
        [first] = [r for r in store.audit_log.records() if r["channel"] == "link"]
    finally:
        store.engine.dispose()
    assert first["detail"]["client"] == "127.0.0.1", first["detail"]


def _slow_clients(port: int, heads: list[bytes]) -> list[socket.socket]:
    socks = []
    for head in heads:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(head)
        socks.append(s)
    return socks


def test_slow_headers_and_slow_bodies_are_closed_while_the_api_answers(served: Served) -> None:
    # 50 clients dripping their request line and headers, 10 dripping a body they promised, one byte a second each.
    headers = b"GET /healthz HTTP/1.1\r\nHost: ops\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\n"
    body_head = (
        f"POST /alerts/alertmanager HTTP/1.1\r\nHost: ops\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n"
    ).encode()
    slow = [(s, headers[1:]) for s in _slow_clients(served.port, [headers[:1]] * 50)]
    slow += [(s, b"{" + b" " * 400) for s in _slow_clients(served.port, [body_head] * 10)]
    answers: dict[socket.socket, bytes] = {s: b"" for s, _ in slow}
    closed: set[socket.socket] = set()
    healthy = 0

    # Bounded: one byte a second to each open connection until the server has closed them all (it must, after its
    # 2 s timeouts), or 40 rounds; the assertion is on what the server did, not on how long it took.
    def read(wait: float) -> None:
        readable, _, _ = select.select([s for s, _ in slow if s not in closed], [], [], wait)
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            answers[s] += data
            if not data:
                closed.add(s)

    for second in range(40):
        # Read what already arrived before dripping the next byte: a byte sent after the server's 408 and close
        # draws a reset that discards the unread 408 (it happened once in a loaded suite).
        read(0.0)
        for s, rest in slow:
            if s not in closed and second < len(rest):
                try:
                    s.sendall(rest[second : second + 1])
                except OSError:
                    read(0.0)  # whatever the reset left readable
                    closed.add(s)
        read(1.0)
        healthy += web.get(f"{served.url}/healthz", timeout=10).status_code == 200
        if len(closed) == len(slow):
            break
    for s, _ in slow:
        s.close()
    assert len(closed) == len(slow), f"{len(slow) - len(closed)} of {len(slow)} slow connections were never closed"
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers.values()), {a[:40] for a in answers.values()}
    assert healthy >= 1  # the API answered others meanwhile
    timeouts = [r for r in served.records() if "did not arrive within" in str(r.get("message"))]
    assert len(timeouts) == len(slow) and all(r["level"] == "info" for r in timeouts)


def test_a_client_gone_mid_body_is_one_info_line_without_a_traceback(served: Served) -> None:
    s = socket.create_connection(("127.0.0.1", served.port), timeout=5)
    s.sendall(
        f"POST /alerts/alertmanager HTTP/1.1\r\nHost: ops\r\nAuthorization: Bearer {TOKEN}\r\n"
        'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"version": "4", '.encode()
    )
    time.sleep(0.3)  # the request reaches the route, which waits for the rest of the body
    s.close()

    def gone() -> list[dict[str, Any]]:
        return [r for r in served.records() if "disconnected" in str(r.get("message"))]

    wait_until(lambda: bool(gone()), 20, "the disconnect to be logged", served.log)
    assert web.get(f"{served.url}/healthz", timeout=10).status_code == 200  # and the process is fine
    [line] = gone()
    assert line["level"] == "info" and line["path"] == "/alerts/alertmanager", line
    text = served.log.read_text()
    assert "Traceback" not in text and "ClientDisconnect" not in text, text[-3000:]
    assert not [r for r in served.records() if r.get("level") in ("error", "critical", "raw")], text[-3000:]
