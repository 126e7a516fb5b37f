"""Errors that do not mislead, as a user sees them: `runtime-ops` run as a process of its own. An unreachable
PostgreSQL is an outage (host and port, no credentials, no advice to restore), in the CLI and behind the anonymous
`/readyz`; no command prints a database password; a mistake is one line on stderr with exit status 2 and no
traceback; a SQLite URL in a folder that does not exist creates nothing."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from runtime_ops_tests.support import approvals_support
from runtime_ops_tests.support.servers import free_port

PASSWORD = "Pw-0f-the-DBA-7c1e"
SCRUBBED = ("RUNTIME_OPS_", "SLACK_", "REDIS_URL", "AWS_ENDPOINT_URL", "DAGSTER_HOME")
HEADER = "type: runtime_ops.components.RetrievalPipeline\nattributes:\n  name: alpha\n"


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`runtime-ops ARGS` in `cwd` with only `env` of runtime_ops's variables, as a user's shell runs it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    return subprocess.run(
        [sys.executable, "-m", "runtime_ops.cli", *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def one_line_error(done: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """The single `error: ...` line a refused command printed (and nothing else on stderr)."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


# ------------------------------------------------------------------------------------------ outage is not damage


def test_an_unreachable_postgresql_is_an_outage_named_by_host_and_port_only(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there: the connection is refused
    url = f"postgresql://ops_admin:{PASSWORD}@127.0.0.1:{port}/prod_state"
    home = tmp_path / "home"
    for command in (["status"], ["db", "check"], ["keys", "list"]):
        done = cli(*command, cwd=tmp_path, RUNTIME_OPS_HOME=str(home), RUNTIME_OPS_DATABASE_URL=url)
        line = one_line_error(done, status=4)
        assert "unreachable" in line and f"127.0.0.1:{port}" in line, line
        assert "refused" in line, line
        for leaked in (PASSWORD, "ops_admin", "prod_state", "restore", "backup", "damaged"):
            assert leaked not in done.stderr + done.stdout, (leaked, line)
    assert not (home / "state.db").exists()


def test_readyz_says_unreachable_without_topology_and_logs_the_details(
    env: Any, postgres_server: Any, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The ops API is up and its PostgreSQL goes down: the anonymous probe says only that the store is
    unreachable; the log names host and port (never the password, user or database, and no restore advice)."""
    from runtime_ops.api.app import create_app
    from runtime_ops.api.routes import health
    from runtime_ops.settings import get_settings

    with_password = postgres_url.replace("postgres@", f"postgres:{PASSWORD}@")  # trust auth: accepted, unused
    database = with_password.rsplit("/", 1)[1]
    env(database_url=with_password)
    with TestClient(create_app(get_settings())) as client:
        ready = approvals_support.ready(lambda: client.get("/readyz")).json()
        assert ready["status"] == "ready", ready
        postgres_server.stop("immediate")
        try:
            health._checked.clear()  # checked now, not at the next 30 s mark
            with caplog.at_level(logging.WARNING, logger="runtime_ops.api.health"):
                reply = client.get("/readyz")
            assert reply.status_code == 503 and reply.json()["status"] == "unreachable", reply.text
            for leaked in (PASSWORD, "postgres", database, "127.0.0.1", str(postgres_server.port), "restore"):
                assert leaked not in reply.text, (leaked, reply.text)
            [logged] = [r.getMessage() for r in caplog.records if r.name == "runtime_ops.api.health"]
            assert "unreachable" in logged and f"127.0.0.1:{postgres_server.port}" in logged, logged
            for leaked in (PASSWORD, database, "restore"):
                assert leaked not in logged, (leaked, logged)
        finally:
            postgres_server.start()  # the same port
        health._checked.clear()
        assert client.get("/readyz").json()["status"] == "ready"


def test_status_and_db_check_show_the_database_url_without_its_password(tmp_path: Path, postgres_url: str) -> None:
    with_password = postgres_url.replace("postgres@", f"postgres:{PASSWORD}@")  # trust auth: accepted, unused
    env = {"RUNTIME_OPS_HOME": str(tmp_path / "home"), "RUNTIME_OPS_DATABASE_URL": with_password}
    assert cli("db", "upgrade", cwd=tmp_path, **env).returncode == 0
    shown = with_password.replace(PASSWORD, "[REDACTED]")
    for command in (["status"], ["db", "check"]):
        done = cli(*command, cwd=tmp_path, **env)
        assert done.returncode == 0, done.stderr
        assert shown in done.stdout, done.stdout
        assert PASSWORD not in done.stdout + done.stderr
    record = (tmp_path / "home" / "instance.json").read_text()  # what `db upgrade` recorded of its database
    assert shown in record and PASSWORD not in record


# ------------------------------------------------------------------------------------------ mistakes: one line


def _pipelines(tmp_path: Path, body: bytes) -> Path:
    folder = tmp_path / "pipelines"
    (folder / "alpha").mkdir(parents=True)
    (folder / "alpha" / "defs.yaml").write_bytes(body)
    return folder


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param(None, "is a folder, not a file", id="folder"),
        pytest.param((HEADER + '  description: "caf\xe9"\n').encode("latin-1"), ":4: not UTF-8 text", id="latin-1"),
        pytest.param(b"", "is empty", id="empty"),
        pytest.param((HEADER + "---\n" + HEADER).encode(), "holds 2 YAML documents", id="two-documents"),
    ],
)
def test_an_unusable_defs_yaml_is_one_line_naming_the_file(tmp_path: Path, body: bytes | None, says: str) -> None:
    if body is None:
        folder = tmp_path / "pipelines"
        (folder / "alpha" / "defs.yaml").mkdir(parents=True)
    else:
        folder = _pipelines(tmp_path, body)
    done = cli("status", cwd=tmp_path, RUNTIME_OPS_HOME=str(tmp_path / "home"), RUNTIME_OPS_PIPELINES_DIR=str(folder))
    line = one_line_error(done)
    assert f"{folder / 'alpha' / 'defs.yaml'}" in line and says in line, line


def test_serve_with_no_approvers_behind_a_public_url_is_one_line_naming_what_to_set(tmp_path: Path) -> None:
    done = cli(
        "serve",
        "--port",
        str(free_port()),
        cwd=tmp_path,
        RUNTIME_OPS_HOME=str(tmp_path / "home"),
        RUNTIME_OPS_PUBLIC_URL="https://ops.example.com",
    )
    line = one_line_error(done)
    assert "names no approvers" in line and "approvals.approvers" in line and "RUNTIME_OPS_APPROVERS" in line


def test_a_sqlite_url_in_a_missing_folder_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    typo = tmp_path / "stat" / "state.db"  # meant: tmp_path/state/state.db
    done = cli(
        "keys",
        "list",
        cwd=tmp_path,
        RUNTIME_OPS_HOME=str(tmp_path / "home"),
        RUNTIME_OPS_DATABASE_URL=f"sqlite:///{typo}",
    )
    line = one_line_error(done)
    assert "RUNTIME_OPS_DATABASE_URL" in line and f"{typo.parent} of the SQLite file" in line and "mkdir" in line
    assert not typo.parent.exists() and not (tmp_path / "home").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(["bogus"], "invalid choice: 'bogus'", id="unknown-command"),
        pytest.param(["audit", "verify", "--bogus"], "unrecognized arguments: --bogus", id="unknown-option"),
        pytest.param(["approvals", "approve"], "runtime-ops approvals approve: the following arguments", id="missing"),
    ],
)
def test_an_argument_mistake_is_one_line_naming_where_the_usage_is(tmp_path: Path, args: list[str], says: str) -> None:
    line = one_line_error(cli(*args, cwd=tmp_path, RUNTIME_OPS_HOME=str(tmp_path / "home")))
    assert says in line and "--help`" in line, line


def test_serve_on_an_address_in_use_is_one_line_and_a_failing_status(tmp_path: Path) -> None:
    """The ops API binds its address before it starts: an address in use is refused in one line (exit 2), not a
    started-and-stopped application with uvicorn's error in the log and status 0."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli(
            "serve",
            "--port",
            str(port),
            cwd=tmp_path,
            RUNTIME_OPS_HOME=str(tmp_path / "home"),
            RUNTIME_OPS_APPROVERS="U1",
        )
    line = one_line_error(done)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line, line
    assert "startup" not in done.stdout + done.stderr  # refused before the application started
