"""`make dev` on a fresh clone prints no Python warning; Ctrl-C exits 0 with no process left.

`runtime-ops dev` (what `make dev` runs) starts on a fresh home and seeds the demo, so a run is in flight when
Ctrl-C (SIGINT to the terminal's foreground process group) arrives: the hardest moment to stop quietly.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import dagster as dg
import psutil
import pytest

from runtime_ops_tests.support import web
from runtime_ops_tests.support.dev_process import session_processes
from runtime_ops_tests.support.topology import wait_for

pytestmark = pytest.mark.slow(seconds=40)  # alone on 2 cores (Dec 2026): started first, see conftest.py

# What a newcomer would have to learn to ignore: a Python warning (`BetaWarning: ...`, `SupersessionWarning: ...`
# or its `warnings.warn(` source line), Dagster's notice that a dagster.yaml in the working directory is not
# used, click's "Aborted!" after a second interrupt, and any traceback.
NOISE = re.compile(r"\w+Warning\b|warnings\.warn|will not be used|Aborted!|Traceback \(most recent call last\)")
# A sensor tick that did nothing, as Dagster's daemon logs it: the UI keeps these, the console does not.
IDLE_TICK = re.compile(r"Checking for new runs for sensor: |Sensor \S+ skipped: |No run requests returned for ")
# Ctrl-C stops every process of `runtime-ops dev` well within this (a run in flight is interrupted, not awaited).
STOP_SECONDS = 60


def _answers(url: str) -> bool:
    return web.get(url, timeout=5).status_code == 200


def _run_in_flight(instance: dg.DagsterInstance) -> bool:
    return bool(instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]), limit=1))


def test_the_console_shows_an_approval_link_once() -> None:
    """Without Slack the approvals sensor prints each announcement with its usable link; Dagster's echo of the
    sensor's log line (the token redacted, for the UI) stays off `make dev`'s console."""
    from datetime import UTC, datetime, timedelta

    from runtime_ops.approvals import links
    from runtime_ops.cli.dev import shown
    from runtime_ops.observability.redaction import REDACTOR

    expires = datetime.now(UTC) + timedelta(hours=1)
    token = links.issue("s" * 32, request_id="apr-1", approver="alice", digest="d" * 64, expires_at=expires)
    message = f"approval request apr-1 (candidate v2) waits for alice: http://127.0.0.1:8000/approvals/{token}"
    echo = REDACTOR.text(message)
    assert token not in echo
    printed = [
        f"2026-12-05 00:25:39 +0000 - dagster - WARNING - __repository__ - demo__approvals_sensor - {echo}\n",
        f"[runtime_ops] {message}\n",
    ]
    assert [line for line in printed if shown(line)] == [f"[runtime_ops] {message}\n"]
    assert shown(
        "2026-12-05 00:25:39 +0000 - dagster - INFO - __repository__ - demo__landing_sensor - landing batch b1\n"
    )


MAKEFILE = """\
dev:
\t{python} -m runtime_ops.cli dev --port {ui} --api-port {api}
"""


def _terminal_session() -> None:
    """In the child: its own session whose controlling terminal is the pty on stdin (as a login shell has)."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_make_dev_in_a_terminal_prints_no_warning_and_ctrl_c_mid_run_exits_0_leaving_no_process(
    env: Any, tmp_path: Path
) -> None:
    """Through make, in a real pseudo-terminal: Ctrl-C is the terminal's, not a signal the test picks a target
    for, and it arrives while a run of the seeded demo is in flight. GNU make re-raises a SIGINT it got itself
    (status 130), so `runtime-ops dev` must take the terminal's foreground for itself; make then ends with its
    recipe's status, every process of the session gone, and the console holds nothing a newcomer must ignore."""
    import pty
    import subprocess
    import sys

    from runtime_ops_tests.support.servers import free_port

    home = env()
    ui, api = free_port(), free_port()
    makefile = tmp_path / "Makefile"  # `make dev`'s recipe without its `install` prerequisite
    makefile.write_text(MAKEFILE.format(python=sys.executable, ui=ui, api=api))
    master, slave = pty.openpty()
    log = (tmp_path / "make.log").open("wb")
    make = subprocess.Popen(
        ["make", "-f", str(makefile), "dev"],
        stdin=slave,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        start_new_session=True,
        preexec_fn=_terminal_session,
    )
    os.close(slave)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{ui}/server_info") and _answers(f"http://127.0.0.1:{api}/healthz"),
                 180, "the UI and the ops API")  # fmt: skip
        with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
            wait_for(lambda: _run_in_flight(instance), 120, "a run of the seeded demo in flight")
        started = [p for p in psutil.Process(make.pid).children(recursive=True) if p.is_running()]
        assert len(started) >= 5, started  # make, dg dev, the ops API, the webserver, the daemon, ...

        os.write(master, b"\x03")  # Ctrl-C, typed
        stopping = time.monotonic()
        status = make.wait(timeout=STOP_SECONDS)
        print(f"make dev stopped {time.monotonic() - stopping:.1f} s after Ctrl-C")
        console = (tmp_path / "make.log").read_text(errors="replace")
        assert status == 0, console[-3000:]
        assert "make: ***" not in console and "stopped cleanly" in console
        assert session_processes(make.pid) == []
        assert [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
        assert [line for line in console.splitlines() if NOISE.search(line)] == []
        assert [line for line in console.splitlines() if IDLE_TICK.search(line)] == []
        assert "Dagster UI: http://" in console
        # Every link the console prints (approval pages, runs, the UI) points at a port this session listens on.
        ports = {int(p) for p in re.findall(r"https?://(?:127\.0\.0\.1|localhost):(\d+)", console)}
        assert ports and ports <= {ui, api}, (ports, ui, api)
        # The local operator's key is made on the first start (its file named, never the key), so the "Decide with"
        # command a pending check prints works as printed.
        assert f"is in {home / 'operator_key'}" in console
        key = (home / "operator_key").read_text().strip()
        assert key and key not in console
    finally:
        if make.poll() is None or session_processes(make.pid):
            for p in session_processes(make.pid):
                p.kill()
        os.close(master)
        log.close()
