"""`runtime-ops dev` (what `make dev` runs) as a terminal runs it, for the tests that start, kill and stop it.

It runs in a session of its own, as the foreground process group of that session: the test plays the terminal
(SIGINT to that group is Ctrl-C). `runtime-ops dev` starts its services (`dg dev` and what it starts, the ops API)
in a process group of their own in the same session, so "every process it started" is every process of the
session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import httpx
import psutil

from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.topology import wait_for


def session_processes(sid: int) -> list[psutil.Process]:
    """The live processes of session `sid` (zombies left for their parent to reap are not processes any more)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return found


class Dev:
    """`runtime-ops dev` in a session (process group) of its own, as a terminal runs it."""

    def __init__(self, home: Path, logs: Path) -> None:
        self.home, self.logs = home, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.api = ""
        self.ui = ""
        self.starts = 0

    def start(self, failpoints: str = "") -> float:
        api_port, ui_port = free_port(), free_port()
        self.api = f"http://127.0.0.1:{api_port}"
        self.ui = f"http://127.0.0.1:{ui_port}"
        # Run retries (Dagster's event log consumer daemon) checked every second instead of five, as the test
        # deployments do (support/topology.py): a killed run's retry is what these tests wait for.
        env = {
            **os.environ,
            "RUNTIME_OPS_FAILPOINTS": failpoints,
            "DAGSTER_EVENT_LOG_CONSUMER_DAEMON_INTERVAL_SECONDS": "1",
        }
        self.starts += 1
        log = (self.logs / f"dev{self.starts}.log").open("wb")
        args = ["dev", "--port", str(ui_port), "--api-port", str(api_port)]
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runtime_ops.cli", *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return started

    def ui_answers(self) -> bool:
        try:
            return web.get(f"{self.ui}/server_info", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def instance(self) -> dg.DagsterInstance:
        """The Dagster instance of `runtime-ops dev`'s home (DAGSTER_HOME), once its Dagster has created the
        storage: two processes creating a fresh SQLite storage at once break its schema stamp."""
        wait_for(self.ui_answers, 180, "the Dagster UI of runtime-ops dev")
        return dg.DagsterInstance.from_config(str(self.home / "dagster"))

    @property
    def log(self) -> Path:
        return self.logs / f"dev{self.starts}.log"

    def kill(self) -> None:
        """SIGKILL to every process of the session (`runtime-ops dev`, the UI, the daemon, the code server, run
        workers, steps): a power loss. Repeated until none is left, so that one started meanwhile goes too."""
        assert self.proc is not None
        sid = self.proc.pid

        def session_gone() -> bool:
            procs = session_processes(sid)
            for p in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.send_signal(signal.SIGKILL)
            return not procs

        wait_for(session_gone, 30, "every process of the killed session to exit")
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and (self.proc.poll() is None or session_processes(self.proc.pid)):
            self.kill()

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-40:])
            for p in sorted(self.logs.glob("dev*.log"))
        )
