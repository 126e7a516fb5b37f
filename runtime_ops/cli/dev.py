"""`runtime-ops dev` (what `make dev` runs): the Dagster UI, daemon and code server (`dg dev`) and the ops API on
this machine, stopped in order by Ctrl-C or SIGTERM. Dagster's instance is the checkout's dagster.yaml
(DAGSTER_HOME is the checkout), its storage under RUNTIME_OPS_HOME."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from runtime_ops.cli import instance
from runtime_ops.cli.common import state_store
from runtime_ops.cli.dev_operator import ensure_local_operator
from runtime_ops.command_hint import command
from runtime_ops.components.inference_pipeline import inference_specs
from runtime_ops.components.loading import BUILTIN_DEFS, load_specs
from runtime_ops.demo import land_corpus, land_tickets
from runtime_ops.landing import open_landing
from runtime_ops.recovery.orphans import WATCHED, process_info, sweep, worker_of
from runtime_ops.recovery.workers import gone_reason
from runtime_ops.settings import get_settings
from runtime_ops.store.integrity import checkpoint

# The checkout `runtime-ops dev` runs from: the dg project (pyproject.toml's [tool.dg]) that `dg dev` serves.
CHECKOUT = instance.CHECKOUT
# The one-machine Dagster instance: DAGSTER_HOME is the checkout, where `dg dev` runs (Dagster warns about a
# dagster.yaml in its working folder that is not DAGSTER_HOME's).
DEV_INSTANCE = CHECKOUT / "dagster.yaml"
# The variable DEV_INSTANCE reads its storage folder from ({env: ...}): $RUNTIME_OPS_HOME/dagster.
STORAGE_VARIABLE = "RUNTIME_OPS_DAGSTER_STORAGE"
# What `dg dev` prints that this console leaves out; the Dagster UI keeps all of it (each sensor's ticks and logs).
# A sensor tick that did nothing: the daemon's "Checking for new runs for sensor: ..." that starts every tick, then
# "Sensor ... skipped: ..." or "No run requests returned for ..., skipping"; and the automation sensor's
# bookkeeping of each evaluation (a tick that requests runs still shows "Tick produced N runs" and "Submitting N
# runs").
IDLE_TICK = re.compile(
    r" - dagster\.daemon\.(?:SensorDaemon|AssetDaemon) - \S*INFO\S* - (?:"
    r"Checking for new runs for sensor: |Sensor \S+ skipped: |No run requests returned for \S+, skipping"
    r"|Checking \d+ assets/checks and |Prefetching asset records |Done prefetching asset records"
    r"|Tick produced 0 runs |Adding \d+ asset evaluations |Submitting 0 runs |Finished auto-materialization tick)"
)
# Dagster's echo of an approval announcement (the approvals sensor's log line, its link's token redacted): on this
# console the sensor prints the announcement with its usable link (approvals/sensors.py), so it shows once.
REDACTED_ANNOUNCEMENT = re.compile(r" - dagster - \S*WARNING\S* - \S+ - \w+__approvals_sensor - .*\[REDACTED\]")


def shown(line: str) -> bool:
    """Whether a line of `dg dev`'s output reaches this console."""
    return not (IDLE_TICK.search(line) or REDACTED_ANNOUNCEMENT.search(line))


# The auto-approve margin `runtime-ops dev` runs with unless RUNTIME_OPS_AUTO_APPROVE_MARGIN is set: the demo's
# second candidate (the rest of the corpus, `demo seed`) gains about +0.1 nDCG@5, which clears the shipped 0.02, so
# the approval step would never show. Above it, that candidate waits for a person; the first model still promotes
# itself (nothing to beat), and a candidate whose whole interval lies 0.2 above production still does.
DEV_AUTO_APPROVE_MARGIN = "0.2"

# How long the services get to stop after `runtime-ops dev` was asked to (Dagster gives its webserver and daemon
# 60 s each); whatever of them still runs then is killed.
STOP_TIMEOUT_SECONDS = 90.0


def cmd_dev(args: argparse.Namespace) -> int:
    """Prepare Dagster's storage under RUNTIME_OPS_HOME, seed the demo data, run the ops API and `dg dev`."""
    with _terminal_foreground():
        return _dev(args)


@contextlib.contextmanager
def _terminal_foreground() -> Iterator[None]:
    """While `runtime-ops dev` runs, it alone is the terminal's foreground process group, so Ctrl-C reaches it
    alone. Under `make dev`, make would get the SIGINT too, and GNU make re-raises it on itself once its recipe
    ends: it exited 130 however cleanly we stopped. The terminal goes back to the group that had it."""
    import signal

    fd = sys.stdin.fileno() if sys.stdin is not None else -1
    try:
        before = os.tcgetpgrp(fd) if fd >= 0 and os.isatty(fd) else None
    except OSError:
        before = None
    if before is None or before != os.getpgrp():  # no terminal, or started in the background: leave it be
        yield
        return

    def hand_terminal_to(group: int) -> None:
        # A process that is not in the foreground group may not set it unless it ignores SIGTTOU.
        previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(fd, group)
        finally:
            signal.signal(signal.SIGTTOU, previous)

    try:
        os.setpgid(0, 0)
        hand_terminal_to(os.getpgrp())
    except OSError:  # a session leader (run straight from a login shell) already is its own group
        pass
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            hand_terminal_to(before)


def link_urls(api_host: str, api_port: int, ui_host: str, ui_port: int) -> dict[str, str]:
    """The base URLs of the links the console prints (approval pages, Dagster runs): the ports this session's ops
    API and UI listen on (a wildcard address is shown as loopback). Loopback public URLs keep the demo's open local
    approvals (`pipeline/resolve.py` `check_approvers`)."""

    def shown(host: str) -> str:
        return "127.0.0.1" if host in ("0.0.0.0", "::") else host

    return {
        "RUNTIME_OPS_PUBLIC_URL": f"http://{shown(api_host)}:{api_port}",
        "RUNTIME_OPS_DAGSTER_URL": f"http://{shown(ui_host)}:{ui_port}",
    }


def _dev(args: argparse.Namespace) -> int:
    import signal

    asked: list[int] = []  # the signals that asked us to stop

    def ask(signum: int, _: object) -> None:
        asked.append(signum)

    # Installed first: a Ctrl-C while the state store migrates lets the migration finish, then ends here quietly.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, ask)

    settings = get_settings()
    home = settings.resolved_home / "dagster"  # Dagster's storage (DEV_INSTANCE's STORAGE_VARIABLE)
    home.mkdir(parents=True, exist_ok=True)

    store = state_store()  # check and migrate before the first sensor tick
    instance.record("dev")  # `runtime-ops` run from another folder finds this instance, with these pipelines
    told = ensure_local_operator(store.api_keys, settings)
    if told:
        print(told)
    demo = load_specs(settings).get("demo")  # a folder of one's own pipelines may have no demo
    if demo is not None and not args.no_seed and not demo.landing.is_s3:
        landing = open_landing(demo.landing.uri)
        if not next(landing.iter_pages(page_size=1), []):  # an empty landing: the first start
            # Most of the corpus now, the rest with `runtime-ops demo seed`: that second batch trains a new
            # candidate and shows the gate at work.
            landed = land_corpus(landing, subset=0.7)
            print(
                f"seeded {len(landed)} demo documents into {demo.landing.uri}; `{command('demo seed')}` lands the rest"
            )
    for tickets in inference_specs(settings.pipelines_dir or BUILTIN_DEFS, settings).values():
        ticket_landing = open_landing(tickets.landing) if not tickets.landing.startswith("s3://") else None
        if ticket_landing is not None and not args.no_seed and not next(ticket_landing.iter_pages(page_size=1), []):
            model = tickets.model if settings.inference_url else "the local stand-in model"
            print(
                f"seeded {len(land_tickets(ticket_landing))} ticket files into {tickets.landing} (labelled by {model})"
            )
    _fail_orphans(home)
    if asked:  # while preparing: nothing started yet
        return _finish(store, asked, [])
    env = {
        **os.environ,
        "DAGSTER_HOME": str(CHECKOUT),
        STORAGE_VARIABLE: str(home),
        "RUNTIME_OPS_HOME": str(settings.resolved_home),
    }
    if settings.pipelines_dir:  # the services run in the checkout: a relative folder would be read from there
        env["RUNTIME_OPS_PIPELINES_DIR"] = str(settings.pipelines_dir.expanduser().resolve())
    # Readable log lines on a developer's terminal unless JSON was asked for explicitly.
    env.setdefault("RUNTIME_OPS_LOG_FORMAT", "console")
    # The demo shows a candidate waiting for a person unless the margin is set: see DEV_AUTO_APPROVE_MARGIN.
    env.setdefault("RUNTIME_OPS_AUTO_APPROVE_MARGIN", DEV_AUTO_APPROVE_MARGIN)
    api_host, api_port = args.api_host, args.api_port
    for name, url in link_urls(api_host, api_port, args.host, args.port).items():
        env.setdefault(name, url)
    if not settings.alert_token and api_host in ("127.0.0.1", "localhost", "::1"):
        # On this machine only: alerts may be posted without a token (anywhere else set RUNTIME_OPS_ALERT_TOKEN).
        env.setdefault("RUNTIME_OPS_ALERT_OPEN", "true")
    # The services run in a process group of their own, out of the terminal's foreground group: Ctrl-C reaches
    # only this process, which stops them in order (_stop). Sent to every process of the group, as a terminal
    # does, SIGINT also lands in Dagster's helpers that do not expect it (a run worker still importing, a step's
    # log watchers) and each prints a KeyboardInterrupt traceback.
    dagster = subprocess.Popen(
        # `dg dev` in the project's directory serves the code location of pyproject.toml's [tool.dg] with this
        # interpreter. Its output (and its run workers') reaches the console through `shown`.
        [sys.executable, "-m", "dagster_dg_cli.cli", "dev", "--host", args.host, "--port", str(args.port)],
        env=env,
        cwd=CHECKOUT,
        process_group=0,
        preexec_fn=_end_with_parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert dagster.stdout is not None and dagster.stderr is not None
    relays = [_relay(dagster.stdout, sys.stdout), _relay(dagster.stderr, sys.stderr)]
    api = subprocess.Popen(
        [sys.executable, "-m", "runtime_ops.cli", "serve", "--host", api_host, "--port", str(api_port)],
        env=env,
        cwd=CHECKOUT,
        process_group=dagster.pid,
        preexec_fn=_end_with_parent,
    )
    procs = [dagster, api]
    print(
        f"Dagster UI: http://{args.host}:{args.port}   ops API: http://{api_host}:{api_port}"
        f"   (Dagster's storage: {home})",
        flush=True,
    )
    try:
        while not asked and all(p.poll() is None for p in procs):
            time.sleep(0.5)
    finally:
        _stop(procs, group=dagster.pid, home=home, asked=asked)
        for relay in relays:  # the services' last lines before ours
            relay.join(timeout=5)
    return _finish(store, asked, procs)


def _relay(source: IO[bytes], target: IO[str]) -> threading.Thread:
    """Copy the lines of `source` that are `shown` to `target` until every writer of `source` is gone."""

    def copy() -> None:
        out = getattr(target, "buffer", None)
        for raw in iter(source.readline, b""):
            line = raw.decode(errors="replace")
            if not shown(line):
                continue
            if out is not None:
                out.write(raw)
                out.flush()
            else:
                target.write(line)
                target.flush()

    thread = threading.Thread(target=copy, name=f"relay-{getattr(target, 'name', 'out')}", daemon=True)
    thread.start()
    return thread


def _end_with_parent() -> None:
    """In a service's child process before it starts: SIGTERM when `runtime-ops dev` dies (killed, out of memory),
    so its services do not run on without it, out of reach of Ctrl-C (they are in a process group of their own).
    Linux only (prctl PR_SET_PDEATHSIG); elsewhere they outlive it."""
    if sys.platform == "linux":
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def _finish(store: Any, asked: list[int], procs: list[subprocess.Popen[bytes]]) -> int:
    checkpoint(store.engine)  # the state file alone is then the whole state (a copy of it is a backup)
    if asked:
        print("stopped cleanly: the state store's WAL is folded into its file", flush=True)
        return 0
    return max(p.returncode or 0 for p in procs)


def _stop(procs: list[subprocess.Popen[bytes]], *, group: int, home: Path, asked: list[int]) -> None:
    """Stop the services in order and wait until no process of their `group` is left; a second signal to this
    process, or STOP_TIMEOUT_SECONDS, kills what is left.

    SIGINT to `dg dev` (it stops the webserver and the daemon, then tells the code server to stop once its runs
    end) and to the ops API. Once `dg dev` is gone no run is launched or retried any more, and each run still in
    flight gets SIGINT in its worker, once that has announced its pid in the run's event log (from then on it
    handles SIGINT): the run fails as interrupted, its steps stop, and run retries relaunch it at the next start.
    """
    import signal

    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    dagster, stopping = procs[0], len(asked)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS

    def stopping_in_order() -> bool:
        return _group_alive(group, procs) and time.monotonic() < deadline and len(asked) == stopping

    while stopping_in_order() and dagster.poll() is None:
        time.sleep(0.2)
    interrupted: set[int] = set()
    with contextlib.ExitStack() as stack:
        dagster_instance = None
        while stopping_in_order():
            # Opened only now that nothing else may be creating a fresh home's storage (`dg dev` does, at start).
            if dagster_instance is None and (home / "history").exists():
                dagster_instance = stack.enter_context(_dev_instance(home))
            if dagster_instance is not None:
                _interrupt_runs(dagster_instance, group, interrupted)
            time.sleep(0.5)
    if _group_alive(group, procs):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    for p in procs:
        p.wait()


def _interrupt_runs(dagster_instance: Any, group: int, interrupted: set[int]) -> None:
    """SIGINT to the worker of each run in flight that announced itself, once, if it is a process of `group`."""
    import signal

    import dagster as dg

    for record in dagster_instance.get_run_records(dg.RunsFilter(statuses=WATCHED)):
        worker = worker_of(dagster_instance, record.dagster_run.run_id)
        if worker is None or worker.pid in interrupted or gone_reason(worker, process_info(worker.pid)):
            continue
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(worker.pid) == group:
                os.kill(worker.pid, signal.SIGINT)
                interrupted.add(worker.pid)


def _group_alive(group: int, procs: list[subprocess.Popen[bytes]]) -> bool:
    for p in procs:
        p.poll()  # reaps our own children: a zombie still counts as a member of its group
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _dev_instance(home: Path) -> Any:
    """The services' Dagster instance (DEV_INSTANCE, its storage at `home`), opened in this process."""
    import dagster as dg

    os.environ[STORAGE_VARIABLE] = str(home)
    return dg.DagsterInstance.from_config(str(CHECKOUT))


def _fail_orphans(home: Path) -> None:
    """Runs the last `runtime-ops dev` left started (it was killed, or the machine lost power) are marked failed
    before anything starts, so that run retries relaunch them at once (run_recovery_sensor would, a tick later)."""
    if not (home / "history").exists():  # Dagster's SQLite run storage: no runs yet
        return

    with _dev_instance(home) as dagster_instance:
        orphans = sweep(dagster_instance)
    for o in orphans:
        print(f"run {o.run_id} ({o.job_name}) was interrupted ({o.reason}): marked failed; run retries relaunch it")


def register(sub: Any) -> None:
    p = sub.add_parser("dev", help="start the Dagster UI and daemon on the embedded defaults")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.add_argument("--no-seed", action="store_true", help="do not copy the demo corpus into an empty landing")
    p.add_argument("--api-host", default="127.0.0.1")
    p.add_argument("--api-port", type=int, default=8000)
    p.set_defaults(func=cmd_dev, instance="starts")
