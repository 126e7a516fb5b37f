"""A real Dagster deployment for fault-injection tests: separate processes on 127.0.0.1, storage on PostgreSQL
(through a PgBouncer of its own, support/pgbouncer.py, unless a fault proxy sits in between).

    Topology.create(pg, root, ...)      DAGSTER_HOME/dagster.yaml (dagster-postgres storage on its own database,
                                        QueuedRunCoordinator, run retries, run monitoring every 2 s, no telemetry)
      .start_code_server()              `dagster api grpc -m runtime_ops.definitions` on a free port, and a
                                        workspace.yaml (`grpc_server`) pointing at it
      .set_sensors(running={...})       the code location's sensors default to RUNNING; a test keeps only the
                                        ones it needs, *before* the daemon starts, so nothing launches behind
                                        its back (a stray corpus_sensor run would race the run under test)
      .start_daemon()                   `dagster-daemon run -w workspace.yaml`: run queue, run monitoring, run
                                        retries (event log consumer), the sensors left running
      .start_webserver()                `dagster-webserver -w workspace.yaml`, free port (UI, GraphQL: .webserver_url)
      .start_ops_api()                  `runtime-ops serve` on a free port (Slack callbacks, /metrics at .ops_url)
      .launch(job) / .wait_for_run(...) / .worker_pid(run_id) / .kill_worker(run_id) / .stop()
      .dump_stacks()                    every thread's stack of the daemon and the code server (SIGUSR2)

Every process gets the caller's environment (RUNTIME_OPS_*, REDIS_URL, failpoints, ...) plus DAGSTER_HOME, runs
in its own session and is stopped at teardown by killing its process group (a run worker is a child of the code
server, so it goes with it). Each process logs to `root/logs/<name>.log`; `log_tails()` shows them on failure.

The run worker of the default run launcher is a `multiprocessing` child of the code server (its command line
does not carry the run id); its pid is read from the run's "Started process for run (pid: N)" engine event.
`kill_worker` kills the worker's whole process tree (step processes of the multiprocess executor, compute-log
helpers), as an OOM kill of a worker container would. Who notices: the code server polls its children every
0.5 s and fails the run whose worker died; the daemon's event log consumer then launches the retry. Run
monitoring (on, polling every 2 s) fails runs stuck in STARTING and enforces `dagster/max_runtime`, but cannot
health-check the default launcher's workers.

Create the Topology *after* the test has set its RUNTIME_OPS_* environment: the processes inherit it then.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_ops_tests.support import web
from runtime_ops_tests.support.pgbouncer import PgBouncer
from runtime_ops_tests.support.servers import HOST, PostgresServer, free_port, unique_name

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCATION = "runtime_ops"

# The daemon's loops, shortened so a fault is noticed in seconds rather than tens of seconds.
DAEMON_ENV = {
    "DAGSTER_EVENT_LOG_CONSUMER_DAEMON_INTERVAL_SECONDS": "1",  # run retries
}

# As docker/dagster.yaml's `params`: a connection that gets no answer fails in 10 s and Dagster retries it.
DAGSTER_PG_PARAMS = "?connect_timeout=10&keepalives_idle=30&keepalives_interval=10&keepalives_count=3"
# Also as docker/dagster.yaml (straight to PostgreSQL; PgBouncer refuses startup `options`): the server ends a
# statement that waits longer than 60 s (on a lock a vanished client's transaction holds) and a session left idle in
# a transaction for 60 s, so one stuck connection cannot stop a daemon loop for good.
DAGSTER_PG_OPTIONS = "&options=-c%20statement_timeout%3D60s%20-c%20idle_in_transaction_session_timeout%3D60s"

DAGSTER_YAML = """\
telemetry:
  enabled: false
storage:
  postgres:
    postgres_url: "{url}"
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
run_launcher:
  module: dagster.core.launcher
  class: DefaultRunLauncher
run_retries:
  enabled: true
  max_retries: 2
  retry_on_asset_or_op_failure: false
run_monitoring:
  enabled: true
  start_timeout_seconds: 120
  poll_interval_seconds: 2
sensors:
  use_threads: true
  num_workers: 2
"""

# `dagster-daemon`, with every thread's stack printed to its log on SIGUSR2 (`Topology.dump_stacks`); the code
# server has the same from the code location (recovery/stalls.py). What a stuck daemon loop waits on, for a replay.
DAEMON_MAIN = (
    "import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR2, all_threads=True); "
    "from dagster._daemon.cli import main; sys.argv[0] = 'dagster-daemon'; sys.exit(main())"
)

WORKSPACE_YAML = """\
load_from:
  - grpc_server:
      host: {host}
      port: {port}
      location_name: {location}
"""

FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
WILL_RETRY_TAG = "dagster/will_retry"  # set on a run as it fails: whether the daemon will retry it


class TopologyError(RuntimeError):
    """A deployment process did not come up or died; the message carries the tails of the logs."""


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy (returned); TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception as exc:  # a server restarting under the check: keep polling
            last_exc = exc
        else:
            if value:
                return value
        time.sleep(interval)
    raise TimeoutError(f"{what}: not reached after {timeout:.0f}s" + (f" (last error: {last_exc})" if last_exc else ""))


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            if ppid == pid:
                kids.append(int(entry.name))
    return kids


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (from /proc), parents first."""
    tree, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        tree.append(p)
        todo.extend(_children(p))
    return tree


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def _http_ok(url: str) -> bool:
    import httpx

    try:
        return web.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Topology:
    root: Path
    postgres: PostgresServer
    database: str  # Dagster's own database on `postgres`
    environ: dict[str, str]
    home: Path = field(init=False)
    workspace_yaml: Path = field(init=False)
    grpc_port: int = 0
    webserver_url: str = ""
    ops_url: str = ""
    _procs: dict[str, _Proc] = field(default_factory=dict)
    _running_sensors: list[Any] = field(default_factory=list)
    _instance: Any = None
    _workspace_ctx: Any = None
    _exit: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _bouncer: PgBouncer | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        postgres: PostgresServer,
        root: Path,
        *,
        template: str | None = None,
        env: Mapping[str, str | None] | None = None,
        via_port: int | None = None,
    ) -> Topology:
        """A DAGSTER_HOME under `root` whose storage is a fresh database on `postgres` (copied from `template`,
        a migrated dagster-postgres schema, when given). Processes inherit os.environ *as it is now*, updated
        with `env` (None deletes a variable): create the topology after the test has set RUNTIME_OPS_*.
        `via_port`: the deployment reaches that storage through this port (a fault proxy); otherwise through a
        PgBouncer of its own (support/pgbouncer.py: dagster-postgres connects per call)."""
        database = unique_name("dagster_topo")
        postgres.create_database(database, template=template)
        environ = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
        for name, value in (env or {}).items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = str(value)
        topo = cls(root=root, postgres=postgres, database=database, environ=environ)
        topo.home = root / "dagster_home"
        topo.home.mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(exist_ok=True)
        direct = via_port is not None
        if via_port is None:
            topo._bouncer = PgBouncer(postgres.port).start()
            via_port = topo._bouncer.port
        url = postgres.url_for(database).replace(f":{postgres.port}/", f":{via_port}/")
        url += DAGSTER_PG_PARAMS + (DAGSTER_PG_OPTIONS if direct else "")
        (topo.home / "dagster.yaml").write_text(DAGSTER_YAML.format(url=url))
        topo.workspace_yaml = root / "workspace.yaml"
        topo.environ["DAGSTER_HOME"] = str(topo.home)
        return topo

    @property
    def instance(self) -> Any:
        """The DagsterInstance of this deployment (same dagster.yaml as the daemon), for the test process."""
        if self._instance is None:
            from dagster import DagsterInstance

            self._instance = self._exit.enter_context(DagsterInstance.from_config(str(self.home)))
        return self._instance

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, args: list[str], extra_env: Mapping[str, str] | None = None) -> _Proc:
        log = self.root / "logs" / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                args,
                cwd=REPO_ROOT,
                env={**self.environ, **(extra_env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killed as one at teardown
            )
        proc = _Proc(name, popen, log)
        self._procs[name] = proc
        return proc

    def _check_alive(self, proc: _Proc) -> bool:
        if proc.popen.poll() is not None:
            raise TopologyError(f"{proc.name} exited with {proc.popen.returncode}{self.log_tails([proc.name])}")
        return True

    def start_code_server(self, wait: bool = True, timeout: float = 90, port: int | None = None) -> None:
        """`dagster api grpc` serving the runtime_ops code location; with `wait`, returns once it answers a
        ping (else call `wait_code_server()` later: loading the code location overlaps the caller's setup).
        `port`: restart on the port the workspace already names (the daemon and webserver reconnect to it)."""
        self.grpc_port = port or free_port()
        self.workspace_yaml.write_text(WORKSPACE_YAML.format(host=HOST, port=self.grpc_port, location=LOCATION))
        self._spawn(
            "code_server",
            [str(BIN / "dagster"), "api", "grpc", "-m", "runtime_ops.definitions", "-h", HOST,
             "-p", str(self.grpc_port), "--location-name", LOCATION, "--log-level", "warning"],
        )  # fmt: skip
        if wait:
            self.wait_code_server(timeout)

    def wait_code_server(self, timeout: float = 90) -> None:
        from dagster._grpc.client import DagsterGrpcClient

        proc = self._procs["code_server"]
        client = DagsterGrpcClient(port=self.grpc_port, host=HOST)

        def ready() -> bool:
            self._check_alive(proc)
            try:
                return client.ping("ready") is not None
            except Exception:
                return False

        self._wait(ready, timeout, "the code server answering on gRPC")

    def start_daemon(self, timeout: float = 90) -> None:
        """`dagster-daemon run`; returns once every daemon the instance needs has sent a heartbeat and every
        sensor left running has finished a first tick.

        The wait for that first tick is not cosmetic. On its first iteration the daemon stores the state of a
        sensor that is RUNNING by default (`add_instigator_state`: a `jobs` row, then an `instigators` row, on
        an autocommit connection, dagster 1.13.27). A PostgreSQL crash between the two leaves the sensor
        wedged: the state reads back as missing, every later iteration inserts the `jobs` row again and fails
        on its unique key ("InstigatorState ... is already present in storage"), and the sensor never ticks
        again. A fault injected before the first tick would test that, not runtime_ops."""
        proc = self._spawn(
            "daemon", [sys.executable, "-c", DAEMON_MAIN, "run", "-w", str(self.workspace_yaml), "--log-level", "info"],
            DAEMON_ENV,
        )  # fmt: skip
        required = set(self.instance.get_required_daemon_types())

        def ready() -> bool:
            self._check_alive(proc)
            return required <= set(self.instance.get_daemon_heartbeats())

        self._wait(ready, timeout, f"the daemon's heartbeats ({', '.join(sorted(required))})")
        for sensor in self._running_sensors:

            def ticked(sensor: Any = sensor) -> bool:
                self._check_alive(proc)
                ticks = self.instance.get_ticks(sensor.get_remote_origin_id(), sensor.selector_id, limit=1)
                return bool(ticks) and ticks[0].status.value != "STARTED"

            self._wait(ticked, timeout, f"a first finished tick of {sensor.name}")

    def start_webserver(self, timeout: float = 90, port: int | None = None) -> str:
        """`dagster-webserver` on the same workspace and instance; returns its URL once /server_info answers."""
        port = port or free_port()
        proc = self._spawn(
            "webserver",
            [str(BIN / "dagster-webserver"), "-w", str(self.workspace_yaml), "-h", HOST, "-p", str(port)],
        )
        self.webserver_url = f"http://{HOST}:{port}"
        self._wait(lambda: self._check_alive(proc) and _http_ok(f"{self.webserver_url}/server_info"), timeout,
                   "the webserver answering /server_info")  # fmt: skip
        return self.webserver_url

    def start_ops_api(self, port: int | None = None, timeout: float = 60) -> str:
        """`runtime-ops serve` (the ops API) with this deployment's environment; its URL once /readyz is 200."""
        port = port or free_port()
        proc = self._spawn(
            "ops_api",
            [str(BIN / "runtime-ops"), "serve", "--host", HOST, "--port", str(port), "--log-level", "warning"],
        )
        self.ops_url = f"http://{HOST}:{port}"
        self._wait(lambda: self._check_alive(proc) and _http_ok(f"{self.ops_url}/readyz"), timeout,
                   "the ops API answering /readyz")  # fmt: skip
        return self.ops_url

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """POST a query to the webserver's GraphQL endpoint; its `data` (errors raise)."""

        resp = web.post(f"{self.webserver_url}/graphql", json={"query": query, "variables": dict(variables or {})},
                          timeout=30)  # fmt: skip
        resp.raise_for_status()
        body = resp.json()
        if body.get("errors"):
            raise TopologyError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def stop_daemon(self) -> None:
        self._kill("daemon")

    def sigkill(self, name: str) -> None:
        """SIGKILL a process and its whole group at once (what an OOM kill or a node loss does), no grace."""
        self._kill(name, grace=0)

    def pid_of(self, name: str) -> int | None:
        proc = self._procs.get(name)
        return None if proc is None else proc.popen.pid

    def assert_running(self) -> None:
        """Every started process is still up (a fault must be ridden out, not end the deployment)."""
        for proc in self._procs.values():
            self._check_alive(proc)

    def _wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            wait_for(check, timeout, what)
        except TimeoutError as exc:
            raise TopologyError(f"{exc}{self.log_tails()}") from None

    def _kill(self, name: str, grace: float = 3.0) -> None:
        proc = self._procs.pop(name, None)
        if proc is None:
            return
        if grace > 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=grace)
        # The group (run workers and their step processes included) goes, whether or not the leader obeyed.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=10)

    def stop(self) -> None:
        """Kill every process (daemon first, so it launches nothing more) and drop Dagster's database.

        SIGKILL at once, not SIGTERM and a grace period: nothing a process does on its way out is checked here,
        and the code server and the webserver each sit out the whole grace period (3 s apiece per test)."""
        if self._workspace_ctx is not None:
            with contextlib.suppress(Exception):
                self._workspace_ctx.__exit__(None, None, None)
            self._workspace_ctx = None
        for name in ("daemon", *list(self._procs)):
            self._kill(name, grace=0)
        with contextlib.suppress(Exception):
            self._exit.close()
        self._instance = None
        if self._bouncer is not None:
            self._bouncer.stop()
        if not self.postgres.running:
            self.postgres.start()
        self.postgres.drop_database(self.database)

    def dump_stacks(self, names: tuple[str, ...] = ("daemon", "code_server"), wait: float = 1.0) -> str:
        """Every thread's stack of these processes (SIGUSR2, which both register), as they printed it to their logs."""
        sizes: dict[str, int] = {}
        for name in names:
            proc = self._procs.get(name)
            if proc is not None and proc.popen.poll() is None:
                sizes[name] = proc.log.stat().st_size
                os.kill(proc.popen.pid, signal.SIGUSR2)
        time.sleep(wait)
        out = []
        for name, size in sizes.items():
            proc = self._procs[name]
            with open(proc.log, "rb") as log:
                log.seek(size)
                out.append(f"--- stacks of {name} (pid {proc.popen.pid}) ---\n{log.read().decode(errors='replace')}")
        return "\n".join(out)

    def log_tails(self, names: list[str] | None = None, lines: int = 40) -> str:
        out = []
        for log in sorted((self.root / "logs").glob("*.log")):
            if names is None or log.stem in names:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"\n--- last lines of {log.name} ---\n" + "\n".join(tail))
        return "".join(out)

    # ------------------------------------------------------------------ the code location, seen from here
    @contextlib.contextmanager
    def _workspace(self) -> Iterator[Any]:
        """A workspace request context on the running code server (as `dagster job launch` builds one)."""
        from dagster._core.workspace.context import WorkspaceProcessContext
        from dagster._core.workspace.load_target import WorkspaceFileTarget

        if self._workspace_ctx is None:
            ctx = WorkspaceProcessContext(
                self.instance, WorkspaceFileTarget(paths=[str(self.workspace_yaml)]), read_only=False
            )
            ctx.__enter__()
            self._workspace_ctx = ctx
        yield self._workspace_ctx.create_request_context()

    def _repository(self, request_context: Any) -> Any:
        location = request_context.get_code_location(LOCATION)
        [repo] = location.get_repositories().values()
        return location, repo

    def set_sensors(self, running: set[str] | frozenset[str] = frozenset()) -> None:
        """Start the named sensors and stop every other one (stored instigator state, read by the daemon)."""
        with self._workspace() as request_context:
            _, repo = self._repository(request_context)
            self._running_sensors = []
            for sensor in repo.get_sensors():
                if sensor.name in running:
                    self.instance.start_sensor(sensor)
                    self._running_sensors.append(sensor)
                else:
                    self.instance.stop_sensor(sensor.get_remote_origin_id(), sensor.selector_id, sensor)

    def launch(
        self, job_name: str, run_config: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None
    ) -> str:
        """Create a run of `job_name` from the code server's snapshot and submit it to the run queue (what
        `dagster job launch -w workspace.yaml -j JOB` does); the daemon dequeues and launches it."""
        from dagster._cli.job import _create_run

        with self._workspace() as request_context:
            location, repo = self._repository(request_context)
            run = _create_run(
                instance=self.instance,
                code_location=location,
                remote_repo=repo,
                remote_job=repo.get_full_job(job_name),
                run_config=dict(run_config or {}),
                tags=dict(tags or {}),
                op_selection=None,
                run_id=None,
            )
            self.instance.submit_run(run.run_id, request_context)
            return run.run_id

    # ------------------------------------------------------------------ runs
    def run(self, run_id: str) -> Any:
        return self.instance.get_run_by_id(run_id)

    def wait_for_run(self, run_id: str, statuses: tuple[str, ...] = FINISHED, timeout: float = 120) -> Any:
        """The run once its status is one of `statuses` (names of DagsterRunStatus)."""

        def reached() -> Any:
            run = self.run(run_id)
            return run if run is not None and run.status.value in statuses else None

        try:
            return wait_for(reached, timeout, f"run {run_id} reaching {'/'.join(statuses)}")
        except TimeoutError as exc:
            run = self.run(run_id)
            raise TopologyError(f"{exc}; it is {run.status.value if run else 'missing'}{self.log_tails()}") from None

    def retries_of(self, run_id: str) -> list[Any]:
        """Runs Dagster launched as retries of `run_id` (tag dagster/parent_run_id), oldest first."""
        from dagster import RunsFilter

        runs = self.instance.get_runs(RunsFilter(tags={"dagster/parent_run_id": run_id}))
        return sorted(runs, key=lambda r: self.instance.get_run_record_by_id(r.run_id).create_timestamp)

    def wait_for_retry(self, run_id: str, timeout: float = 60) -> Any:
        def retry() -> Any:
            runs = self.retries_of(run_id)
            return runs[0] if runs else None

        try:
            return wait_for(retry, timeout, f"a retry of run {run_id}")
        except TimeoutError as exc:
            raise TopologyError(f"{exc}{self.log_tails(['daemon', 'code_server'])}") from None

    def wait_retry_handled(self, run_id: str, timeout: float = 60) -> None:
        """Returns once the daemon's run-retry loop (its event log consumer) has read the failure of `run_id`: a
        retry it launches for it exists by then, and none comes after (its cursor, saved once a pass's retries are
        submitted, is past the failure's event)."""
        from dagster import DagsterEventType
        from dagster._daemon.auto_run_reexecution.event_log_consumer import _create_cursor_key

        records = self.instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_FAILURE).records
        assert records, f"run {run_id} has not failed"
        key = _create_cursor_key(DagsterEventType.RUN_FAILURE)

        def handled() -> bool:
            cursor = self.instance.daemon_cursor_storage.get_cursor_values({key}).get(key)
            return cursor is not None and int(cursor) >= records[-1].storage_id

        self._wait(handled, timeout, f"the daemon's retry loop past the failure of run {run_id}")

    def final_run(self, run_id: str, timeout: float = 180) -> Any:
        """Follow `run_id` through its retries until one finishes without a further retry; that run.

        Whether a failed run is retried is Dagster's decision, recorded on the run as it fails (tag
        `dagster/will_retry`, re-tagged "false" by the daemon when it gives up): the retry is awaited while that
        tag says "true", however long the daemon takes to launch it, and a run it says "false" of is final."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(1.0, deadline - time.monotonic())

        while True:
            run = self.wait_for_run(run_id, timeout=left())
            if run.status.value != "FAILURE":
                return run

            def retry_or_final(failed: str = run_id) -> Any:
                retries = self.retries_of(failed)
                if retries:
                    return retries[-1]
                will_retry = (self.run(failed).tags.get(WILL_RETRY_TAG) or "").lower()
                return self.run(failed) if will_retry == "false" else None

            try:
                following = wait_for(retry_or_final, left(), f"a retry of run {run_id}, or Dagster's word of none")
            except TimeoutError as exc:
                raise TopologyError(f"{exc}{self.log_tails(['daemon', 'code_server'])}") from None
            if following.run_id == run_id:
                return following
            run_id = following.run_id

    def events(self, run_id: str) -> list[Any]:
        return list(self.instance.all_logs(run_id))

    def worker_pid(self, run_id: str, timeout: float = 60) -> int:
        """The pid of the run's worker process, from its "Started process for run (pid: N)" engine event."""
        pattern = re.compile(r"Started process for run \(pid: (\d+)\)")

        def pid() -> int | None:
            for event in self.events(run_id):
                match = pattern.search(event.message or "")
                if match:
                    return int(match.group(1))
            return None

        return int(wait_for(pid, timeout, f"the worker pid of run {run_id}"))

    def kill_worker(self, run_id: str) -> list[int]:
        """SIGKILL the run's worker and every process it started (freeze the tree first, so nothing forks or
        reports in between). Returns the pids killed."""
        tree = process_tree(self.worker_pid(run_id))
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        tree = list(dict.fromkeys(tree + [p for pid in tree for p in process_tree(pid)]))
        for pid in reversed(tree):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not any(pid_alive(p) for p in tree), 10, "the killed worker tree to disappear")
        return tree
