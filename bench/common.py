"""Shared pieces of the benchmarks: the registry, result records, machine info, percentiles, a closed-loop
HTTP load generator and subprocess servers.

Benchmarks report *ratios* against a baseline measured in the same run on the same machine; absolute
numbers are printed for context only and nothing here ever fails on a timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

# ---------------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Benchmark:
    name: str  # a prefix of the names of the records it produces, e.g. "approvals"
    run: Callable[[], list[BenchResult]]
    description: str = ""


REGISTRY: dict[str, Benchmark] = {}


def benchmark(name: str, description: str = "") -> Callable[[Callable[[], list[BenchResult]]], Any]:
    """Register a benchmark: a no-argument function returning its `BenchResult` records."""

    def register(fn: Callable[[], list[BenchResult]]) -> Callable[[], list[BenchResult]]:
        if name in REGISTRY and REGISTRY[name].run is not fn:
            raise ValueError(f"benchmark {name!r} is registered twice")
        REGISTRY[name] = Benchmark(name, fn, description or (fn.__doc__ or "").strip().splitlines()[0])
        return fn

    return register


# ---------------------------------------------------------------------------------------------- results


def machine_info() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


@dataclass(frozen=True)
class Target:
    """`on` is what the target constrains: the `ratio` (ours / baseline) or our own value (`ours`)."""

    on: str  # "ratio" | "ours"
    op: str  # ">=" | "<="
    value: float

    def __post_init__(self) -> None:
        if self.on not in ("ratio", "ours") or self.op not in (">=", "<="):
            raise ValueError(f"bad target {self}")

    def met(self, ours: float, ratio: float) -> bool:
        x = ratio if self.on == "ratio" else ours
        if math.isnan(x):
            return False
        return x >= self.value if self.op == ">=" else x <= self.value

    def describe(self, unit: str) -> str:
        return f"ratio {self.op} {self.value:g}" if self.on == "ratio" else f"ours {self.op} {self.value:g} {unit}"


@dataclass
class BenchResult:
    name: str
    ours: float
    baseline: float
    unit: str
    target: Target
    details: dict[str, Any] = field(default_factory=dict)  # context: counts, errors, p50s, settings

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("nan")

    @property
    def passed_target(self) -> bool:
        return self.target.met(self.ours, self.ratio)

    def to_json(self, machine: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": self.name,
            "ours": round(self.ours, 3),
            "baseline": round(self.baseline, 3),
            "ratio": None if math.isnan(self.ratio) else round(self.ratio, 3),
            "unit": self.unit,
            "target": self.target.describe(self.unit),
            "passed_target": self.passed_target,
            "machine": machine,
            "details": self.details,
        }


# ---------------------------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class LoadStats:
    """One closed-loop run: every request's latency, the wall time of the measured phase, statuses."""

    requests: int
    errors: int  # responses other than 2xx plus transport errors
    seconds: float
    latencies_ms: tuple[float, ...]
    statuses: dict[str, int]
    client_cpu_seconds: float  # CPU the load generator itself used during the measured phase
    server_cpu_seconds: float  # CPU the server process used during the measured phase (NaN: unknown)
    host_busy_seconds: float  # CPU all cores were busy during the measured phase (NaN: unknown)

    @property
    def ok(self) -> int:
        return self.requests - self.errors

    @property
    def throughput(self) -> float:
        """Successful (2xx) responses per second of the measured phase."""
        return self.ok / self.seconds if self.seconds else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "throughput_rps": round(self.throughput, 1),
            "p50_ms": round(self.p(50), 2),
            "p90_ms": round(self.p(90), 2),
            "p99_ms": round(self.p(99), 2),
            "max_ms": round(max(self.latencies_ms, default=float("nan")), 2),
            "statuses": self.statuses,
            # CPU seconds per wall second: 1.0 is one core fully busy (the server's GIL ceiling).
            "cpu_cores_busy": {
                "load_generator": _share(self.client_cpu_seconds, self.seconds),
                "server": _share(self.server_cpu_seconds, self.seconds),
                "host_total": _share(self.host_busy_seconds, self.seconds),
            },
            "server_cpu_ms_per_request": _share(self.server_cpu_seconds * 1000.0, self.requests),
        }


def combine(runs: Sequence[LoadStats]) -> LoadStats:
    """Several measured phases as one: latencies pooled, counts, wall and CPU time summed."""
    statuses: Counter[str] = Counter()
    for r in runs:
        statuses.update(r.statuses)
    return LoadStats(
        sum(r.requests for r in runs),
        sum(r.errors for r in runs),
        sum(r.seconds for r in runs),
        tuple(x for r in runs for x in r.latencies_ms),
        dict(statuses),
        sum(r.client_cpu_seconds for r in runs),
        sum(r.server_cpu_seconds for r in runs),
        sum(r.host_busy_seconds for r in runs),
    )


def _share(x: float, over: float) -> float | None:
    return None if not over or math.isnan(x) else round(x / over, 3)


# ---------------------------------------------------------------------------------------------- load


@dataclass(frozen=True)
class Call:
    """One HTTP request to send. `headers` is called right before sending (e.g. to sign with a fresh time)."""

    path: str
    body: bytes
    headers: Callable[[bytes], dict[str, str]]
    method: str = "POST"


def run_closed_loop(
    base_url: str,
    calls: Sequence[Call],
    *,
    concurrency: int,
    warmup: int,
    max_seconds: float,
    timeout: float = 30.0,
    server_pid: int | None = None,
    client: str = "raw",
) -> LoadStats:
    """Send `calls` in order from `concurrency` clients, each sending its next request when the last returns.

    Each client keeps its own keep-alive connection. The first `warmup` calls are not measured. The measured
    phase stops early when `max_seconds` have passed (requests in flight are still waited for and counted).
    With `server_pid`, the CPU the server used during the measured phase is recorded too.

    `client="raw"` (default) speaks HTTP/1.1 directly over asyncio streams (uvloop when installed): it costs
    a few tens of microseconds per request, so on a small machine the load generator does not become the
    bottleneck of the fast baseline. `client="httpx"` uses one `httpx.AsyncClient` with a pool of
    `concurrency` connections; it spends ~3 ms of CPU per request under this load (measured on 2 cores), which
    caps the baseline below what the server can do and flatters the ratio.
    """
    if warmup >= len(calls):
        raise ValueError("need more calls than the warm-up")
    if client not in ("raw", "httpx"):
        raise ValueError(f"unknown client {client!r}: use 'raw' or 'httpx'")
    coro = _closed_loop(base_url, calls, concurrency, warmup, max_seconds, timeout, server_pid, client)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


Send = Callable[[Call], Awaitable[int]]


class _RawHTTP:
    """One HTTP/1.1 keep-alive connection over asyncio streams: small requests, Content-Length responses."""

    def __init__(self, base_url: str, timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the raw client speaks plain http:// only, not {base_url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.host_header = parts.netloc
        self.timeout = timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self, call: Call) -> int:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._exchange(call)
        except BaseException:
            self.close()  # the connection is in an unknown state: the next request reconnects
            raise

    async def _exchange(self, call: Call) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = [f"{call.method} {call.path} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {len(call.body)}"]
        head += [f"{k}: {v}" for k, v in call.headers(call.body).items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + call.body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection":
                close = value.strip().lower() == b"close"
            elif name == b"transfer-encoding":
                raise RuntimeError("the raw client does not read chunked responses")
        if length:
            await self.reader.readexactly(length)
        if close:
            self.close()
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _closed_loop(
    base_url: str,
    calls: Sequence[Call],
    concurrency: int,
    warmup: int,
    max_seconds: float,
    timeout: float,
    server_pid: int | None,
    client: str,
) -> LoadStats:
    def server_cpu() -> float:
        return process_cpu_seconds(server_pid) if server_pid else float("nan")

    async with contextlib.AsyncExitStack() as stack:
        if client == "httpx":
            limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
            pool = await stack.enter_async_context(httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout))

            async def send_httpx(call: Call) -> int:
                resp = await pool.request(call.method, call.path, content=call.body, headers=call.headers(call.body))
                return resp.status_code

            senders: list[Send] = [send_httpx] * concurrency
        else:
            conns = [_RawHTTP(base_url, timeout) for _ in range(concurrency)]
            for c in conns:
                stack.callback(c.close)
            senders = [c.send for c in conns]

        async def phase(batch: Sequence[Call], deadline: float | None) -> tuple[list[float], Counter[str], float]:
            latencies: list[float] = []
            statuses: Counter[str] = Counter()
            it = iter(batch)

            async def worker(send: Send) -> None:
                for call in it:  # a shared iterator: each call is sent exactly once
                    if deadline is not None and time.perf_counter() > deadline:
                        return
                    t0 = time.perf_counter()
                    try:
                        statuses[str(await send(call))] += 1
                    except (OSError, TimeoutError, asyncio.IncompleteReadError, httpx.HTTPError, ValueError) as exc:
                        statuses[type(exc).__name__] += 1
                    latencies.append((time.perf_counter() - t0) * 1000.0)

            t0 = time.perf_counter()
            await asyncio.gather(*(worker(send) for send in senders))
            return latencies, statuses, time.perf_counter() - t0

        await phase(calls[:warmup], None)
        cpu0, server0, host0 = time.process_time(), server_cpu(), host_cpu_busy_seconds()
        latencies, statuses, seconds = await phase(calls[warmup:], time.perf_counter() + max_seconds)
        cpu, server, host = time.process_time() - cpu0, server_cpu() - server0, host_cpu_busy_seconds() - host0
    errors = sum(n for status, n in statuses.items() if not status.startswith("2"))
    return LoadStats(len(latencies), errors, seconds, tuple(latencies), dict(statuses), cpu, server, host)


# ---------------------------------------------------------------------------------------------- servers


def server_env(**extra: str) -> dict[str, str]:
    """This environment without any runtime_ops / Slack / cloud settings, plus `extra`.

    A benchmark server must never pick up a developer's real Slack token or database from the shell.
    """
    prefixes = ("RUNTIME_OPS_", "SLACK_", "REDIS_", "AWS_", "DAGSTER_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


class UvicornServer:
    """`python -m uvicorn --factory <target>` in its own process: one worker, no access log, 127.0.0.1."""

    def __init__(self, factory: str, env: dict[str, str], *, name: str, health_path: str = "/healthz") -> None:
        from runtime_ops_tests.support.servers import free_port

        self.factory, self.env, self.name, self.health_path = factory, env, name, health_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix=f"bench_{name}_", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> UvicornServer:
        cmd = [
            sys.executable, "-m", "uvicorn", "--factory", self.factory, "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", "1", "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} server exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + self.health_path, timeout=1).status_code == 200:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} server: no answer on {self.health_path} in {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.log.unlink()


@contextlib.contextmanager
def running(*servers: UvicornServer) -> Iterator[tuple[UvicornServer, ...]]:
    """Start the servers and stop every one of them on the way out, whatever happens."""
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_cpu_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (Linux /proc/stat; NaN elsewhere)."""
    try:
        values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")
