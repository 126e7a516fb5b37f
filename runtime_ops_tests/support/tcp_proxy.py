"""A TCP proxy on 127.0.0.1 that can make the network in front of a server misbehave, for fault injection.

    with TcpProxy(upstream_port=pg.port) as proxy:   # clients connect to proxy.port
        proxy.delay(0.3)        # every chunk, both ways, waits 0.3 s first
        proxy.reset()           # every open connection gets a TCP RST now; new ones are reset as they arrive
        proxy.blackhole()       # nothing flows and nothing is answered; new connections hang (a partition)
        proxy.heal()            # back to passing bytes: held data flows again, as after a partition heals

One thread accepts; each connection has two pump threads (client -> server, server -> client). A black hole
stops the pumps reading, so what clients send waits in kernel buffers and goes through when the proxy heals,
as TCP retransmission would deliver it; a client's own timeout is what notices the partition. `reset` closes
with SO_LINGER 0, so the peers see ECONNRESET rather than an orderly end of stream.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from typing import Self

from runtime_ops_tests.support.servers import HOST

__all__ = ["TcpProxy"]

_CHUNK = 65536


def _hard_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Connection:
    def __init__(self, proxy: TcpProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: socket.socket | None = None
        self.closed = threading.Event()

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a pump that cannot start (threads exhausted): the client sees a reset, not a hang
            self.proxy.accept_errors.append(f"connection: {type(exc).__name__}: {exc}")
            self.close(hard=True)

    def _run(self) -> None:
        proxy = self.proxy
        if not proxy._wait_flowing(self):  # a black hole: the connection hangs until healed or reset
            return
        if proxy.mode == "reset":
            self.close(hard=True)
            return
        try:
            self.upstream = socket.create_connection((proxy.upstream_host, proxy.upstream_port), timeout=10)
            self.upstream.settimeout(None)
        except OSError:
            self.close(hard=True)
            return
        threading.Thread(target=self._pump, args=(self.upstream, self.client), daemon=True).start()
        self._pump(self.client, self.upstream)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        proxy = self.proxy
        try:
            while not self.closed.is_set():
                if not proxy._wait_flowing(self):
                    return
                data = src.recv(_CHUNK)
                if not data:
                    break
                if not proxy._wait_flowing(self):
                    return
                if proxy.latency > 0:
                    time.sleep(proxy.latency)
                dst.sendall(data)
        except OSError:
            pass
        self.close(hard=False)

    def close(self, hard: bool) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            if hard:
                _hard_close(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
        self.proxy._forget(self)


class TcpProxy:
    def __init__(self, upstream_port: int, upstream_host: str = HOST) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.mode = "pass"  # "pass" | "reset" | "blackhole"
        self.latency = 0.0
        self.accepted = 0
        self.resets = 0
        self.accept_errors: list[str] = []
        self._flowing = threading.Condition()
        self._conns: set[_Connection] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener = socket.create_server((HOST, 0), backlog=128)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name=f"tcp-proxy-{self.port}", daemon=True)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        with self._flowing:
            self._flowing.notify_all()
        with contextlib.suppress(OSError):
            self._listener.close()
        for conn in self._snapshot():
            conn.close(hard=True)

    # ------------------------------------------------------------------ faults
    def delay(self, seconds: float) -> None:
        """Add `seconds` before every chunk is forwarded, both ways (latency, not loss)."""
        self.latency = seconds

    def reset(self) -> None:
        """RST every open connection, and every new one until `heal()`."""
        with self._flowing:
            self.mode = "reset"
            self._flowing.notify_all()
        for conn in self._snapshot():
            self.resets += 1
            conn.close(hard=True)

    def blackhole(self) -> None:
        """Stop every byte both ways, on open and new connections alike, until `heal()`."""
        with self._flowing:
            self.mode = "blackhole"

    def heal(self) -> None:
        with self._flowing:
            self.mode = "pass"
            self.latency = 0.0
            self._flowing.notify_all()

    @property
    def accepting(self) -> bool:
        """The accepting thread is alive (a proxy that stopped accepting is a fault nobody asked for)."""
        return self._thread.is_alive()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    # ------------------------------------------------------------------ internals
    def _snapshot(self) -> list[_Connection]:
        with self._lock:
            return list(self._conns)

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            self._conns.discard(conn)

    def _wait_flowing(self, conn: _Connection) -> bool:
        """Block while black-holed; False once the connection or the proxy is closed."""
        with self._flowing:
            while self.mode == "blackhole" and not self._stopped.is_set() and not conn.closed.is_set():
                self._flowing.wait(0.5)
        return not (self._stopped.is_set() or conn.closed.is_set())

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError as exc:
                if self._stopped.is_set():
                    return
                # A client that gave up before its connection was accepted (ECONNABORTED), or descriptors running
                # out for a moment: keep accepting. Returning here would leave every later client connected to a
                # port nobody answers, which is a different fault from the one asked for.
                self.accept_errors.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.05)
                continue
            try:
                if self.mode == "reset":
                    self.resets += 1
                    _hard_close(client)
                    continue
                self.accepted += 1
                conn = _Connection(self, client)
                with self._lock:
                    self._conns.add(conn)
                threading.Thread(target=conn.run, daemon=True).start()
            except Exception as exc:  # one connection's trouble must not stop the proxy accepting the next
                self.accept_errors.append(f"{type(exc).__name__}: {exc}")
                _hard_close(client)
