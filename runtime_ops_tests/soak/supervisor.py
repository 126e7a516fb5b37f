"""The soak deployment's process supervisor for dagster-daemon, as a real deployment has one (the Helm chart's
liveness probe runs `dagster-daemon liveness-check`; systemd or a container runtime restarts what exits).

Dagster 1.13's daemon only *warns* when one of its threads stops beating (`DAGSTER_DAEMON_HEARTBEAT_TOLERANCE`,
1,800 s by default) and never exits for it: a thread stuck on a call holds its loop (run queue, monitoring, a
sensor) for good. Every `interval` s this reads the heartbeats the liveness check reads; a daemon that must run and
has not beaten for `tolerance` s while the process has been up that long, or a daemon process that is gone, is
restarted (SIGKILL, then start), its stacks logged first so that the stuck call is on record. The injector's own
kill-and-restart faults hold `lock`, so the two never restart the daemon at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime_ops_tests.soak.deployment import Deployment


class DaemonSupervisor:
    def __init__(
        self,
        deployment: Deployment,
        log: Callable[[str], None],
        *,
        tolerance: float = 120.0,
        interval: float = 10.0,
    ) -> None:
        self.d = deployment
        self.log = log
        self.tolerance = tolerance
        self.interval = interval
        self.restarts: list[str] = []  # why each restart happened, for the history's diagnostics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="soak-daemon-supervisor", daemon=True)

    def start(self) -> DaemonSupervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def stale(self) -> list[str]:
        """The daemons that must run and have not beaten for `tolerance` s, with their last beat's age ([]: live,
        or the process has not been up that long)."""
        up = time.time() - self.d.daemon_started
        if up < self.tolerance:
            return []
        instance = self.d.topo.instance
        beats = instance.get_daemon_heartbeats()
        now = time.time()
        return [
            f"{t} {'never' if t not in beats else f'{now - beats[t].timestamp:.0f}s ago'}"
            for t in instance.get_required_daemon_types()
            if t not in beats or now - beats[t].timestamp >= self.tolerance
        ]

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self._why():
                    continue
                with self.d.restart_lock:  # asked again under the lock: a fault may have just restarted it
                    why = self._why()
                    if why and not self._stop.is_set():
                        self._restart(why)
            except Exception as exc:  # heartbeats unreadable (the database is down): a fault, not the daemon
                self.log(f"supervisor: heartbeats unreadable ({type(exc).__name__}); checking again")

    def _why(self) -> str:
        if self.d.topo.pid_of("daemon") is None:
            return "the daemon process is gone"
        stale = self.stale()
        return f"no heartbeat for {self.tolerance:.0f}s: {', '.join(stale)}" if stale else ""

    def _restart(self, why: str) -> None:
        self.log(f"supervisor: restarting dagster-daemon ({why})")
        with contextlib.suppress(Exception):
            self.log(self.d.topo.dump_stacks(("daemon",)))
        self.restarts.append(why)
        self.d.topo.sigkill("daemon")
        for attempt in range(3):
            try:
                self.d.restart("daemon")
                return
            except Exception as exc:
                self.log(f"supervisor: restart of the daemon failed (attempt {attempt + 1}): {str(exc)[:300]}")
                self.d.topo.sigkill("daemon")
