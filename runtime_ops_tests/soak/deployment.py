"""The deployment a soak runs against: the production topology as local processes on 127.0.0.1.

    PostgreSQL (pgvector)  <- TcpProxy <-  code server, daemon, run workers, webserver, ops API, CLI
    Redis                  <- TcpProxy <-  (locks, rate limits)
    moto (S3 + SQS)        the landing bucket, whose create/remove notifications go to an SQS queue (event mode)
    Slack (local server)   chat.postMessage / chat.update / response_url, as Slack answers them

Every process reaches PostgreSQL and Redis through a fault proxy (`support/tcp_proxy.py`), so the injector can
delay, reset or black-hole the network without touching the servers; the soak's own reads of the final state go
to the servers directly. Processes are started by `support/topology.py`; a killed one is restarted on the port it
had, as a supervisor (systemd, Kubernetes) would, so the others find it again.

`Deployment.environment()` is what the processes and the soak's own clients read (RUNTIME_OPS_*, SLACK_*, ...):
apply it to os.environ *before* `start()`.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import (
    AWS_TEST_ENV,
    HOST,
    MotoServer,
    PostgresServer,
    RedisServer,
    dagster_postgres_template,
    find_pgvector_bindir,
    free_port,
)
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.tcp_proxy import TcpProxy
from runtime_ops_tests.support.topology import Topology, wait_for

__all__ = ["APPROVERS", "CHANNEL", "PREFIX", "SENSORS", "Deployment"]

PREFIX = "landing"
CHANNEL = "C0SOAK"
APPROVERS = ("U2", "U3", "U4")
# The sensors the soak leaves running: the demo pipeline's whole loop, alerts, and run recovery. The tickets
# pipeline's sensors stay off: their landing is the same bucket and their inference server is not started.
SENSORS = frozenset(
    {
        "demo__landing_sensor",
        "demo__corpus_sensor",
        "demo__approvals_sensor",
        "demo__alert_sensor",
        "run_recovery_sensor",
    }
)
PROCESSES = ("code_server", "daemon", "webserver", "ops_api")


@dataclass
class Deployment:
    root: Path
    expire_after: str = "75s"  # a request nobody decides expires within the soak
    log: Callable[[str], None] = print
    pg: PostgresServer = field(init=False)
    redis: RedisServer = field(init=False)
    moto: MotoServer = field(init=False)
    slack: SlackServer = field(init=False)
    pg_proxy: TcpProxy = field(init=False)
    redis_proxy: TcpProxy = field(init=False)
    topo: Topology = field(init=False)
    bucket: str = "soak-landing"
    queue_url: str = ""
    database: str = "runtime_ops"
    ops_port: int = 0
    webserver_port: int = 0
    secrets: dict[str, str] = field(default_factory=dict)
    _daemon_started: float = 0.0  # time.time() the daemon last started
    # Held by whoever kills and restarts a process (the injector's faults, the daemon's supervisor): one at a time.
    restart_lock: threading.RLock = field(default_factory=threading.RLock)
    _started: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ servers
    def start_servers(self) -> None:
        """PostgreSQL, Redis, moto, Slack and the two proxies; the bucket, its queue and notifications."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.pg = PostgresServer(bindir=find_pgvector_bindir())
        self.pg.start()
        self.pg.create_database(self.database)
        self.redis = RedisServer()
        self.redis.start()
        self.moto = MotoServer()
        self.moto.start()
        self.slack = SlackServer(token="xoxb-soak-token", channels={CHANNEL}).start()
        self.pg_proxy = TcpProxy(self.pg.port).start()
        self.redis_proxy = TcpProxy(self.redis.port).start()
        self.ops_port, self.webserver_port = free_port(), free_port()
        self.secrets = {
            "signing": secrets.token_hex(16),
            "link": secrets.token_hex(16),
            "audit": secrets.token_hex(32),
            "alert": secrets.token_hex(16),
        }
        s3, sqs = self.moto.client("s3"), self.moto.client("sqs")
        s3.create_bucket(Bucket=self.bucket)
        self.queue_url = sqs.create_queue(QueueName="soak-landing")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        rules = {"Key": {"FilterRules": [{"Name": "prefix", "Value": PREFIX + "/"}]}}
        s3.put_bucket_notification_configuration(
            Bucket=self.bucket,
            NotificationConfiguration={
                "QueueConfigurations": [
                    {"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"], "Filter": rules},
                ]
            },
        )

    def url(self, *, direct: bool = False) -> str:
        """The state store's URL: through the PostgreSQL proxy (what the deployment uses) or `direct`."""
        url = self.pg.url_for(self.database)
        return url if direct else url.replace(f":{self.pg.port}/", f":{self.pg_proxy.port}/")

    @property
    def ops_url(self) -> str:
        return f"http://{HOST}:{self.ops_port}"

    def environment(self) -> dict[str, str]:
        return {
            "RUNTIME_OPS_HOME": str(self.root / "home"),
            "RUNTIME_OPS_DATABASE_URL": self.url(),
            "RUNTIME_OPS_VECTOR_STORE": self.url(),
            "REDIS_URL": f"redis://{HOST}:{self.redis_proxy.port}/0",
            "RUNTIME_OPS_LANDING": f"s3://{self.bucket}/{PREFIX}",
            "RUNTIME_OPS_SQS_QUEUE_URL": self.queue_url,
            "AWS_ENDPOINT_URL": self.moto.endpoint_url,
            **AWS_TEST_ENV,
            "SLACK_BOT_TOKEN": self.slack.token,
            "SLACK_SIGNING_SECRET": self.secrets["signing"],
            "SLACK_APPROVAL_CHANNEL": CHANNEL,
            "SLACK_API_URL": self.slack.base_url,
            "SLACK_HOOKS_URL": self.slack.url,
            "RUNTIME_OPS_PUBLIC_URL": self.ops_url,
            "RUNTIME_OPS_LINK_SECRET": self.secrets["link"],
            "RUNTIME_OPS_AUDIT_KEY": self.secrets["audit"],
            "RUNTIME_OPS_ALERT_TOKEN": self.secrets["alert"],
            "RUNTIME_OPS_APPROVERS": ",".join(APPROVERS),
            "RUNTIME_OPS_REQUIRED_APPROVALS": "2",
            "RUNTIME_OPS_EXPIRE_AFTER": self.expire_after,
            "RUNTIME_OPS_ESCALATE_AFTER": "off",
            # Every candidate after the first needs people (support/flow.py's NEEDS_A_HUMAN).
            "RUNTIME_OPS_AUTO_APPROVE_MARGIN": "1.0",
            "RUNTIME_OPS_MAX_REGRESSION": "1.0",
            "RUNTIME_OPS_SENSOR_INTERVAL": "1s",
            # A run silent this long while its worker lives is hung (its steps log every few seconds, 20 s at most
            # under the longest fault): run_recovery_sensor prints its stacks into code_server.log, kills it and
            # fails it for run retries. The default (1 h) would outlast the drain.
            "RUNTIME_OPS_RUN_STALL_TIMEOUT": "90s",
            "RUNTIME_OPS_LOG_FORMAT": "json",
        }

    # ------------------------------------------------------------------ processes
    def start_processes(self) -> None:
        """The Dagster deployment (through the proxy) and the ops API; call with environment() applied."""
        template = dagster_postgres_template(self.pg)
        self.topo = Topology.create(self.pg, self.root / "topology", template=template, via_port=self.pg_proxy.port)
        self.topo.start_code_server()
        self.topo.set_sensors(running=set(SENSORS))
        self._daemon_started = time.time()
        self.topo.start_daemon()
        self.topo.start_webserver(port=self.webserver_port)
        self.topo.start_ops_api(port=self.ops_port)

    @property
    def daemon_started(self) -> float:
        """time.time() the daemon last started."""
        return self._daemon_started

    def restart(self, name: str) -> None:
        """Start `name` again on the port it had (after a kill)."""
        if name == "code_server":
            self.topo.start_code_server(port=self.topo.grpc_port, timeout=180)
        elif name == "daemon":
            self._daemon_started = time.time()
            self.topo.start_daemon(timeout=180)
        elif name == "webserver":
            self.topo.start_webserver(port=self.webserver_port, timeout=180)
        elif name == "ops_api":
            self.topo.start_ops_api(port=self.ops_port, timeout=180)
        else:
            raise ValueError(f"unknown process {name!r}; one of {PROCESSES}")

    # ------------------------------------------------------------------ health
    def probes(self) -> dict[str, bool]:
        """What answers right now: each process and server the deployment needs (short timeouts)."""
        out = {
            "postgres": self.pg.running,
            "redis": self.redis.ping(),
            "ops_api": _ok(f"{self.ops_url}/readyz"),
            "webserver": _ok(f"http://{HOST}:{self.webserver_port}/server_info"),
            "code_server": self._code_server_ok(),
            "daemon": self._daemon_ok(),
        }
        return out

    def healthy(self) -> bool:
        return all(self.probes().values())

    def wait_healthy(self, timeout: float) -> float | None:
        """Seconds until every probe passes (None: not within `timeout`, and the failing probes are logged)."""
        t0 = time.monotonic()
        with contextlib.suppress(TimeoutError):
            wait_for(self.healthy, timeout, "the deployment healthy", interval=0.5)
            return time.monotonic() - t0
        failing = sorted(name for name, ok in self.probes().items() if not ok)
        detail = f" ({self._daemon_detail()})" if "daemon" in failing else ""
        self.log(f"not healthy after {timeout:.0f}s: {', '.join(failing) or 'every probe passes now'}{detail}")
        if {"daemon", "code_server"} & set(failing):  # a thread stuck on a call: where, for whoever replays the seed
            with contextlib.suppress(Exception):
                self.log(self.topo.dump_stacks())
            with contextlib.suppress(Exception):
                self.log(self._server_sessions())
        return None

    def _server_sessions(self) -> str:
        """What PostgreSQL's sessions are doing (state, wait, the query's start): a client stuck in a query is
        either waiting on the server (a lock: wait_event Lock) or on a socket the server already answered."""
        rows = self.pg.admin_rows(
            "SELECT pid, datname, application_name, state, wait_event_type, wait_event, "
            "round(extract(epoch FROM now() - query_start))::int, left(query, 120) "
            "FROM pg_stat_activity WHERE backend_type = 'client backend' ORDER BY query_start"
        )
        lines = [" | ".join("" if v is None else str(v) for v in row) for row in rows]
        return "--- postgres sessions (pid | db | app | state | wait type | wait | age s | query) ---\n" + "\n".join(
            lines
        )

    def _daemon_detail(self) -> str:
        """Which of Dagster's daemons stopped beating, and for how long (a thread stuck on a connection that never
        answers), with the PostgreSQL proxy's open connections: what a replay needs to find the stuck call."""
        try:
            stale = self._stale_daemons()
        except Exception as exc:
            return f"heartbeats unreadable: {type(exc).__name__}"
        return f"stale: {', '.join(stale) or 'none'}; postgres proxy: {self.pg_proxy.open_connections} open"

    # A thread stuck for good (on a connection that never answers) stops beating: 90 s is three missed beats.
    STALE_AFTER_S = 90

    def _stale_daemons(self) -> list[str]:
        """The daemons that must run but sent no heartbeat since the daemon (re)started or within STALE_AFTER_S,
        each with its last beat's age. (Dagster's daemons beat every 30 s; a restart makes them beat at once.)"""
        beats = self.topo.instance.get_daemon_heartbeats()
        now = time.time()
        return [
            f"{t} {'never' if t not in beats else f'{now - beats[t].timestamp:.0f}s ago'}"
            for t in self.topo.instance.get_required_daemon_types()
            if t not in beats
            or now - beats[t].timestamp >= self.STALE_AFTER_S
            or beats[t].timestamp < self._daemon_started - 1
        ]

    def _code_server_ok(self) -> bool:
        from dagster._grpc.client import DagsterGrpcClient

        try:
            return DagsterGrpcClient(port=self.topo.grpc_port, host=HOST).ping("soak") is not None
        except Exception:
            return False

    def _daemon_ok(self) -> bool:
        """The daemon process is up and every daemon it must run is beating (`_stale_daemons`)."""
        if self.topo.pid_of("daemon") is None:
            return False
        try:
            return not self._stale_daemons()
        except Exception:
            return False

    # ------------------------------------------------------------------ teardown
    def stop(self) -> None:
        for stop in (
            lambda: self.topo.stop(),
            lambda: self.pg_proxy.stop(),
            lambda: self.redis_proxy.stop(),
            lambda: self.slack.stop(),
            lambda: self.moto.stop(),
            lambda: self.redis.close(),
            lambda: self.pg.close(),
        ):
            with contextlib.suppress(Exception):
                stop()


def _ok(url: str) -> bool:
    try:
        return web.get(url, timeout=3).status_code == 200
    except httpx.HTTPError:
        return False
