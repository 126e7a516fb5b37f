"""PgBouncer in front of a test PostgreSQL, for the Dagster storage of a deployment of real processes.

Outside the webserver, dagster-postgres opens a new connection for every storage call (SQLAlchemy's NullPool; no
dagster.yaml setting changes it). A test deployment's daemon, code server and run workers, and the test watching
them, open 30 to 70 connections a second: about 15,000 of the 30,000 a `make test` opens (Dec 2026). A new
PostgreSQL backend costs about 3.5 ms of CPU: 2,000 connect-query-close cycles took 4.4-5.0 s direct and 1.1 s
through PgBouncer. Production deployments put PgBouncer in front of PostgreSQL for the same reason.

Session pooling: a client keeps one server connection until it disconnects, and `DISCARD ALL` resets it before
the next client gets it, so SET, advisory locks and LISTEN behave as on a direct connection. When PostgreSQL goes
down, the first new client waits up to `query_wait_timeout` (10 s, as the deployment's `connect_timeout=10` gives
an unanswered connect; PgBouncer's default of 120 s would stall a daemon loop for two minutes), the next ones are
refused at once until a server connect succeeds again (tried every `server_login_retry`, 1 s).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from runtime_ops_tests.support.servers import (
    HOST,
    find_system_binary,
    free_port,
    unprivileged_user,
    wait_until,
)

PGBOUNCER_HINT = "pgbouncer not found: install the Debian package `pgbouncer` (`make test-install` does)"

CONFIG = """\
[databases]
* = host={target_host} port={target_port}

[pgbouncer]
listen_addr = {host}
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root}/userlist.txt
pool_mode = session
server_reset_query = DISCARD ALL
max_client_conn = 1000
default_pool_size = 60
server_idle_timeout = 60
server_login_retry = 1
query_wait_timeout = 10
logfile = {root}/pgbouncer.log
pidfile = {root}/pgbouncer.pid
syslog = 0
log_connections = 0
log_disconnections = 0
"""


class PgBouncer:
    """`PgBouncer(target_port).start()`: a pooler on a free 127.0.0.1 port for every database of the server at
    `target_port`, as user `postgres` (trust, as the test clusters). It refuses to run as root, like PostgreSQL."""

    def __init__(self, target_port: int, target_host: str = HOST) -> None:
        self.binary = find_system_binary("pgbouncer", PGBOUNCER_HINT)
        self.target_host = target_host
        self.target_port = target_port
        self.user = unprivileged_user()
        self.root = Path(tempfile.mkdtemp(prefix="runtime_ops_pgbouncer_", dir="/tmp" if self.user else None))
        self.port = 0
        self._proc: subprocess.Popen[Any] | None = None
        atexit.register(self.stop)

    @property
    def logfile(self) -> Path:
        return self.root / "pgbouncer.log"

    def start(self) -> PgBouncer:
        self.port = free_port()
        (self.root / "userlist.txt").write_text('"postgres" ""\n')
        (self.root / "pgbouncer.ini").write_text(
            CONFIG.format(
                target_host=self.target_host, target_port=self.target_port, host=HOST, port=self.port, root=self.root
            )
        )
        ids: dict[str, Any] = {}
        if self.user is not None:
            for path in (self.root, *self.root.iterdir()):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
            ids = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        self._proc = subprocess.Popen(
            [self.binary, "-q", str(self.root / "pgbouncer.ini")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            **ids,
        )
        wait_until(self._accepts, 30, f"PgBouncer on port {self.port}", self.logfile)
        return self

    def _accepts(self) -> bool:
        import psycopg2

        psycopg2.connect(host=HOST, port=self.port, user="postgres", dbname="postgres", connect_timeout=2).close()
        return True

    def stop(self) -> None:
        """Stop the pooler (its server connections close with it) and delete its directory (idempotent)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)
            self._proc = None
        shutil.rmtree(self.root, ignore_errors=True)
