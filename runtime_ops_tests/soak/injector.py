"""Carries out a fault plan against a running `Deployment`, and records each fault: what it hit, when it began, when
it was lifted and when the deployment answered every health probe again.

Faults on processes (kills, the lock holder's SIGSTOP) are done one at a time, as are faults on one proxy (a heal
must not end another fault on it); a network fault may overlap a process fault, and a Redis outage anything. A
fault that finds nothing to hit (no run in progress to kill, no lock held) is logged as skipped and not counted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dagster import DagsterRunStatus, RunsFilter

from runtime_ops_tests.soak.deployment import Deployment
from runtime_ops_tests.soak.fault_plan import PlannedFault
from runtime_ops_tests.soak.history import Fault
from runtime_ops_tests.soak.workload import Recorder
from runtime_ops_tests.support.servers import HOST
from runtime_ops_tests.support.topology import TopologyError, pid_alive, process_tree

__all__ = ["Injector"]

RECOVERY_TIMEOUT = 240.0
LOCK_PREFIX = "runtime_ops:lock:"


class Injector:
    def __init__(self, deployment: Deployment, recorder: Recorder, seed: int, log: Callable[[str], None]) -> None:
        self.d = deployment
        self.rec = recorder
        self.seed = seed
        self.log = log
        self.faults: list[Fault] = []
        self.skipped: list[tuple[float, str, str]] = []
        self._ids = 0
        self._lock = threading.Lock()
        self._processes = threading.Lock()
        self._proxies = {"pg": threading.Lock(), "redis": threading.Lock()}
        self._redis = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.stop_event = threading.Event()

    def run(self, plan: list[PlannedFault]) -> None:
        """Inject `plan` (times relative to the recorder's start) until it is done or `stop_event` is set."""
        for planned in plan:
            delay = planned.at - self.rec.now()
            if delay > 0 and self.stop_event.wait(delay):
                break
            thread = threading.Thread(target=self._inject, args=(planned,), name=f"fault-{planned.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float = RECOVERY_TIMEOUT + 60) -> None:
        for thread in self._threads:
            thread.join(timeout)

    # ------------------------------------------------------------------ one fault
    def _inject(self, planned: PlannedFault) -> None:
        kind = planned.kind
        try:
            if kind.startswith("kill_") and kind != "kill_run_worker":
                with self._processes:
                    self._kill_and_restart(planned, kind.removeprefix("kill_"))
            elif kind == "kill_run_worker":
                with self._processes:
                    self._kill_run_worker(planned)
            elif kind == "lock_holder_stop":
                with self._processes:
                    self._stop_lock_holder(planned)
            elif kind == "postgres_restart":
                with self._processes:
                    start = self.rec.now()
                    self.d.pg.restart()
                    self._done(planned, "postgres", start)
            elif kind == "redis_down":
                with self._redis:
                    start = self.rec.now()
                    self.d.redis.stop()
                    time.sleep(planned.hold)
                    self.d.redis.start()
                    self._done(planned, "redis", start)
            else:
                server, _, how = kind.partition("_")
                self._network(planned, server, how)
        except Exception as exc:  # the injector failing is the soak failing: keep the reason with the fault
            self.log(f"fault {kind} could not be injected: {type(exc).__name__}: {exc}")
            self.skipped.append((self.rec.now(), kind, f"{type(exc).__name__}: {exc}"))

    def _done(self, planned: PlannedFault, target: str, start: float, detail: str = "") -> None:
        end = self.rec.now()
        waited = self.d.wait_healthy(RECOVERY_TIMEOUT)
        recovered = None if waited is None else self.rec.now()
        with self._lock:
            self._ids += 1
            fault = Fault(
                id=self._ids,
                kind=planned.kind,
                target=target,
                start=start,
                end=end,
                recovered=recovered,
                seed=self.seed,
                detail=detail,
            )
            self.faults.append(fault)
        took = "never" if recovered is None else f"{recovered - start:.1f}s"
        self.log(
            f"t={start:7.1f}s fault #{fault.id} {planned.kind} on {target} (held {end - start:.1f}s, recovered {took})"
        )

    def _skip(self, planned: PlannedFault, why: str) -> None:
        self.skipped.append((self.rec.now(), planned.kind, why))
        self.log(f"t={self.rec.now():7.1f}s skipped {planned.kind}: {why}")

    # ------------------------------------------------------------------ processes
    def _kill_and_restart(self, planned: PlannedFault, name: str) -> None:
        start = self.rec.now()
        with self.d.restart_lock:  # the daemon's supervisor does not restart it meanwhile
            self.d.topo.sigkill(name)
            for attempt in range(3):  # a supervisor restarts until it stays up
                try:
                    self.d.restart(name)
                    break
                except TopologyError as exc:
                    self.log(f"restart of {name} failed (attempt {attempt + 1}): {str(exc)[:300]}")
                    self.d.topo.sigkill(name)
        self._done(planned, name, start)

    def _running_runs(self) -> list[str]:
        with contextlib.suppress(Exception):
            runs = self.d.topo.instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]), limit=20)
            return [r.run_id for r in runs]
        return []

    def _wait_for_run(self, timeout: float = 30.0) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stop_event.is_set():
            runs = self._running_runs()
            if runs:
                return runs[0]
            time.sleep(1.0)
        return None

    def _kill_run_worker(self, planned: PlannedFault) -> None:
        run_id = self._wait_for_run()
        if run_id is None:
            self._skip(planned, "no run in progress within 30 s")
            return
        start = self.rec.now()
        try:
            pids = self.d.topo.kill_worker(run_id)
        except Exception as exc:
            self._skip(planned, f"run {run_id[:8]} had no worker to kill ({type(exc).__name__})")
            return
        self._done(planned, f"run {run_id[:8]}", start, detail=f"pids {pids}")

    def _lock_holder(self) -> tuple[str, int, int] | None:
        """(lock name, holder pid, ms left) of a lock held now by a local process, read from Redis directly."""
        import redis

        client: Any = redis.Redis(host=HOST, port=self.d.redis.port, socket_timeout=2, socket_connect_timeout=2)
        try:
            for key in client.scan_iter(match=LOCK_PREFIX + "*", count=100):
                token, left_ms = client.get(key), client.pttl(key)
                with contextlib.suppress(ValueError, AttributeError):
                    pid = int(token.decode().rsplit(":", 1)[1])  # tokens end `@host:pid` (locks/base.py)
                    if left_ms > 0 and pid_alive(pid):
                        return key.decode().removeprefix(LOCK_PREFIX), pid, int(left_ms)
        except redis.RedisError:
            return None
        finally:
            client.close()
        return None

    def _stop_lock_holder(self, planned: PlannedFault) -> None:
        """SIGSTOP the holder of a lock past the lock's TTL; while none is held, a run worker in progress (a long GC
        pause, a frozen VM) for 15 s. Locks are held for seconds at a time (a promotion, an index fill), so both are
        looked for, for up to 60 s."""
        deadline = time.monotonic() + 60
        target, pause, tree = "", 0.0, []
        while not tree and time.monotonic() < deadline and not self.stop_event.is_set():
            held = self._lock_holder()
            if held is not None:
                lock, pid, left_ms = held
                target, pause, tree = f"holder of lock {lock} (pid {pid})", left_ms / 1000 + 3.0, [pid]
                break
            runs = self._running_runs()
            if runs and time.monotonic() > deadline - 50:  # ten seconds for a lock first, then a worker will do
                with contextlib.suppress(Exception):
                    tree = process_tree(self.d.topo.worker_pid(runs[0], timeout=5))
                    target, pause = f"worker of run {runs[0][:8]} (no lock was held)", 15.0
                    planned = replace(planned, kind="run_worker_stop")
                    break
            time.sleep(0.2)
        if not tree:
            self._skip(planned, "no lock held and no run in progress within 60 s")
            return
        start = self.rec.now()
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        time.sleep(pause)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._done(planned, target, start, detail=f"stopped {pause:.1f}s")

    # ------------------------------------------------------------------ network
    def _network(self, planned: PlannedFault, server: str, how: str) -> None:
        proxy = self.d.pg_proxy if server == "pg" else self.d.redis_proxy
        with self._proxies[server]:
            start = self.rec.now()
            if how == "delay":
                proxy.delay(planned.magnitude)
            elif how == "reset":
                proxy.reset()
            elif how == "blackhole":
                proxy.blackhole()
            else:
                raise ValueError(f"unknown network fault {planned.kind!r}")
            time.sleep(planned.hold)
            proxy.heal()
            name = "postgres" if server == "pg" else "redis"
            self._done(planned, f"{name} via proxy", start, detail=f"{how} {planned.hold:.1f}s")
