"""State you can check and back up, on the embedded default (SQLite): a truncated or overwritten state file stops
the CLI, the API's start-up and `/readyz` with the file and the fix named; `db backup` taken while writers run
restores to a state `audit verify` and `status` accept, with the latest promotion; a clean stop of
`runtime-ops dev` folds the WAL into the file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from runtime_ops.api.app import create_app
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store.integrity import StateDamaged
from runtime_ops_tests.support.approvals_support import operator_cli, ready
from runtime_ops_tests.support.servers import free_port

pytestmark = pytest.mark.slow(seconds=67)  # alone on 2 cores (Dec 2026): started first, see conftest.py


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`runtime-ops ...` in a process of its own, as an operator runs it (this process's checks are cached)."""
    return subprocess.run(
        [sys.executable, "-m", "runtime_ops.cli", *args], capture_output=True, text=True, timeout=120, env=os.environ
    )


_HOLDERS: list[Any] = []


def _filled_store(env: Any, tmp_path: Path) -> Path:
    """A migrated store with a few MB of pages in the file and recent pages still in the WAL (a connection stays
    open, as a killed process leaves it: the WAL is not folded back)."""
    import sqlite3

    env()
    store = open_store(get_settings().resolved_database_url, get_settings())
    store.audit_log.append(event="note", actor="ops", channel="cli", detail={"first": True})
    store.engine.dispose()
    path = Path(get_settings().resolved_database_url.removeprefix("sqlite:///"))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS padding (i INTEGER PRIMARY KEY, pad TEXT)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO padding (pad) VALUES (?)", [("x" * 200,)] * 20_000)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO padding (pad) VALUES (?)", [("late",)] * 500)
    conn.execute("COMMIT")
    _HOLDERS.append(conn)
    assert path.stat().st_size > 2_000_000 and Path(f"{path}-wal").stat().st_size > 0
    return path


@pytest.fixture(autouse=True)
def _close_holders() -> Any:
    yield
    while _HOLDERS:
        _HOLDERS.pop().close()


def _truncate_half(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def _overwrite_middle(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.seek(path.stat().st_size // 2)
        fh.write(os.urandom(64 * 1024))


def _truncate_without_wal(path: Path) -> None:
    while _HOLDERS:
        _HOLDERS.pop().close()  # the last connection folds the WAL into the file and removes it
    Path(f"{path}-wal").unlink(missing_ok=True)
    Path(f"{path}-shm").unlink(missing_ok=True)
    _truncate_half(path)


@pytest.mark.parametrize("damage", [_truncate_half, _overwrite_middle, _truncate_without_wal])
def test_a_damaged_state_file_stops_the_cli_the_api_and_readyz_naming_file_and_fix(
    env: Any, tmp_path: Path, damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = _filled_store(env, tmp_path)
    app = create_app(get_settings())  # started while the file was whole
    with TestClient(app) as client:
        assert ready(lambda: client.get("/readyz")).json()["status"] == "ready"
        damage(path)
        from runtime_ops.api.routes import health

        health._checked.clear()  # the next probe checks now rather than in 30 s
        with caplog.at_level("WARNING", logger="runtime_ops.api.health"):
            reply = client.get("/readyz")
        # The anonymous probe says what state the store is in, not where it is; the log names the file and the fix.
        assert reply.status_code == 503 and reply.json()["status"] == "damaged", reply.text
        assert str(tmp_path) not in reply.text
        [logged] = [r.getMessage() for r in caplog.records if r.name == "runtime_ops.api.health"]
        assert str(path) in logged and "runtime-ops db restore" in logged
    for command in (["status"], ["audit", "verify"], ["db", "check"]):
        done = _cli(*command)
        assert done.returncode == 3, (command, done.stdout, done.stderr)
        assert f"the state file {path} is damaged" in done.stderr and "runtime-ops db restore" in done.stderr
        assert "Traceback" not in done.stderr
    from runtime_ops.store import store as store_module

    store_module._CHECKED.clear()  # as a fresh `runtime-ops serve` would
    with pytest.raises(StateDamaged, match="runtime-ops db restore"):
        create_app(get_settings())


def test_a_backup_taken_while_writers_run_restores_with_the_latest_promotion(
    env: Any, dagster_instance: Any, tmp_path: Path
) -> None:
    from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate

    landing = tmp_path / "landing"
    env(landing=str(landing), **NEEDS_A_HUMAN)
    store, pending, flow = pending_candidate(landing, dagster_instance)
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0
    [promotion] = flow.tick_and_run("approvals_sensor")
    assert promotion.success and store.registry.alias("production") == 2

    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:  # the flow goes on: records land while the copy is taken
        while not stop.is_set():
            store.audit_log.append(event="note", actor="ops", channel="cli", detail={"n": len(written)})
            written.append(1)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.3)
        backup = tmp_path / "backups" / "state.db"
        done = _cli("db", "backup", str(backup))
        assert done.returncode == 0 and "checked" in done.stdout, done.stderr
        assert _cli("db", "backup", str(backup)).returncode == 2  # never overwrites a backup
    finally:
        stop.set()
        thread.join()
    assert len(written) > 10

    # The store is lost; the backup is restored in its place.
    path = Path(get_settings().resolved_database_url.removeprefix("sqlite:///"))
    store.engine.dispose()
    _overwrite_middle(path)
    assert _cli("status").returncode == 3
    restored = _cli("db", "restore", str(backup))
    assert restored.returncode == 0, restored.stderr
    status = _cli("status")
    assert status.returncode == 0 and "production: 2" in status.stdout, status.stdout
    verify = _cli("audit", "verify")
    assert verify.returncode == 0 and "intact" in verify.stdout, verify.stderr


def test_restore_refuses_while_another_process_holds_the_store(env: Any, tmp_path: Path) -> None:
    path = _filled_store(env, tmp_path)
    backup = tmp_path / "copy.db"
    assert _cli("db", "backup", str(backup)).returncode == 0
    import sqlite3

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM audit_log").fetchone()  # a reader, as a run would be
    try:
        refused = _cli("db", "restore", str(backup))
        assert (
            refused.returncode == 2 and "is in use" in refused.stderr and "runtime-ops dev`, the API" in refused.stderr
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_clean_stop_of_dev_folds_the_wal_into_the_state_file_and_exits_0(env: Any, tmp_path: Path) -> None:
    env()
    path = Path(get_settings().resolved_database_url.removeprefix("sqlite:///"))
    dev = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtime_ops.cli",
            "dev",
            "--no-seed",
            "--port",
            str(free_port()),
            "--api-port",
            str(free_port()),
        ],
        env=os.environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (path.exists() and Path(f"{path}-wal").exists()) and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(8)  # the daemon's sensors write their first ticks
        assert Path(f"{path}-wal").exists()
        dev.send_signal(signal.SIGTERM)
        out, _ = dev.communicate(timeout=120)
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
    assert dev.returncode == 0, out[-3000:]
    assert "stopped cleanly" in out
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
