"""Is the state store whole, and a consistent copy of it: integrity checks, backup and restore.

A SQLite state file that was truncated or overwritten can still open (the WAL holds recent pages) and answer a
`SELECT 1`, then fail a job later with "database disk image is malformed". `check` runs SQLite's
`quick_check` and compares the schema revision with this code's; `StateDamaged` names the file and the fix.
`backup` copies a live SQLite store with SQLite's online backup API (a consistent snapshot, WAL included,
while writers go on); `restore` puts a checked copy in place once nothing holds the file. PostgreSQL keeps
its own integrity and is backed up with `pg_dump` (`BACKUP_PG`).

An outage is not damage: a database that cannot be reached (refused, timed out, unknown host, refused credentials,
a file that cannot be opened) raises `StateUnreachable`, which names the host and port only and never advises a
restore; only a file that fails SQLite's checks (or cannot be read once open) is `StateDamaged`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from runtime_ops.command_hint import command
from runtime_ops.errors import UserError
from runtime_ops.store.engine import engine_for
from runtime_ops.store.migrate import current_revision, known_revisions

if TYPE_CHECKING:
    from runtime_ops.settings import Settings

BACKUP_PG = (
    'the state store is PostgreSQL: back it up with `pg_dump --format=custom --file=state.dump "$URL"` and '
    'restore with `pg_restore --clean --if-exists --dbname="$URL" state.dump` (both consistent while runs write)'
)


class StateStoreError(UserError, RuntimeError):
    """The state store cannot be used; the message names it (its file, or its server's host and port) and the fix."""

    exit_code = 3


class StateDamaged(StateStoreError):
    """The state store cannot be trusted (a corrupt SQLite file): restore a backup or start empty."""


class StateUnreachable(StateStoreError):
    """No connection to the state store: an outage or a setting to correct, never damage (nothing was changed)."""

    exit_code = 4


# What a failed connection's error says -> what happened and what to do. Matched on the driver's words, which are not
# shown themselves: they can name the database and its user.
_CONNECT_FAILURES = (
    ("connection refused", "refused the connection", "check that the server runs and listens on that address"),
    ("timeout expired", "did not answer in time", "check that the server runs and the network path to it is open"),
    ("timed out", "did not answer in time", "check that the server runs and the network path to it is open"),
    ("could not translate host name", "has a host name that does not resolve", "check the host name and DNS"),
    ("name or service not known", "has a host name that does not resolve", "check the host name and DNS"),
    ("no route to host", "cannot be reached from here", "check the network path to it"),
    ("network is unreachable", "cannot be reached from here", "check the network path to it"),
    ("authentication failed", "refused the credentials", "check the user and password in RUNTIME_OPS_DATABASE_URL"),
    ("no password supplied", "asks for a password", "put the password in RUNTIME_OPS_DATABASE_URL"),
    ("no pg_hba.conf entry", "does not accept this client", "allow this host for that user in its pg_hba.conf"),
    ('role "', "does not know the user", "check the user in RUNTIME_OPS_DATABASE_URL"),
    ("does not exist", "has no such database", "check the database name in RUNTIME_OPS_DATABASE_URL, or create it"),
    ("too many connections", "has no free connection", "try again later, or raise its max_connections"),
    ("starting up", "is starting up", "try again in a moment"),
    ("shutting down", "is shutting down", "try again once it is back"),
    ("server closed the connection", "closed the connection", "check the server's log"),
)


def where(engine: Engine) -> str:
    """The state store as messages name it: its file, or its server's host and port (never the user, the password or
    the database name)."""
    path = sqlite_file(engine)
    if path is not None:
        return f"the state file {path}"
    if engine.dialect.name != "postgresql":
        return f"the {engine.dialect.name} state store"
    host = engine.url.host
    return f"PostgreSQL at {host}:{engine.url.port or 5432}" if host else "PostgreSQL on its local socket"


def unreachable(engine: Engine, exc: BaseException) -> StateUnreachable:
    """The error for a connection to the state store that failed with `exc`."""
    words = " ".join(str(getattr(exc, "orig", None) or exc).lower().split())
    if sqlite_file(engine) is not None:
        return StateUnreachable(
            f"the state store is unreachable: {where(engine)} cannot be opened ({words[:200]}); check "
            "that its folder exists and that this user may read and write it"
        )
    for needle, what, fix in _CONNECT_FAILURES:
        if needle in words:
            return StateUnreachable(f"the state store is unreachable: {where(engine)} {what}; {fix}, then try again")
    return StateUnreachable(
        f"the state store is unreachable: {where(engine)} could not be connected to "
        f"({type(getattr(exc, 'orig', None) or exc).__name__}); check that it runs and that RUNTIME_OPS_DATABASE_URL "
        "names it, then try again"
    )


@dataclass(frozen=True)
class Copy:
    path: Path
    bytes: int
    revision: str | None


def sqlite_file(engine: Engine) -> Path | None:
    """The file of a SQLite engine (None for PostgreSQL or an in-memory database)."""
    if engine.dialect.name != "sqlite" or not engine.url.database or engine.url.database == ":memory:":
        return None
    return Path(engine.url.database)


def _fix(where: str) -> str:
    return (
        f"stop every runtime_ops process, then restore the newest backup (`{command('db restore BACKUP')}`; backups "
        f"are made with `{command('db backup FILE')}`), or move {where} and its -wal/-shm files aside to start empty"
    )


class _CannotOpen(Exception):
    """SQLite could not open the file at all (a missing folder, no permission): not damage."""


def _quick_check(path: Path) -> str | None:
    """SQLite's quick_check of `path`, or the error reading it raised; None when it is whole. Raises _CannotOpen when
    the file cannot be opened at all."""
    try:
        uri = f"{path.resolve().as_uri()}?mode=ro"  # percent-encoded: a path with '?' or '#' stays a path
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.OperationalError as exc:
        if "unable to open" in str(exc):
            raise _CannotOpen(str(exc)) from exc
        return str(exc)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(rows)


def check(engine: Engine, head: str) -> None:
    """Raise unless the store answers (StateUnreachable), is whole (StateDamaged: SQLite's quick_check) and its schema
    revision is one this code knows (`head` or an older one the migrations bring up; a newer one means a newer
    runtime_ops)."""
    path = sqlite_file(engine)
    if path is not None and path.exists():
        try:
            problem = _quick_check(path)
        except _CannotOpen as exc:
            raise unreachable(engine, exc) from None
        if problem:
            raise StateDamaged(f"the state file {path} is damaged ({problem}): {_fix(str(path))}")
    try:
        conn = engine.connect()
    except DBAPIError as exc:
        raise unreachable(engine, exc) from None
    try:
        with conn:
            conn.execute(text("SELECT 1"))
        revision = current_revision(engine)
    except DBAPIError as exc:
        detail = f"{type(exc.orig).__name__}: {str(exc.orig).strip().splitlines()[0][:200]}"
        if path is None:  # the server answered: its own integrity is not in question, the access is
            raise StateStoreError(
                f"{where(engine)} answered but the state store cannot be read ({detail}): check that the user of "
                "RUNTIME_OPS_DATABASE_URL may use that database and that nothing else changed its tables"
            ) from None
        raise StateDamaged(f"the state file {path} cannot be read ({detail}): {_fix(str(path))}") from None
    if revision is not None and revision not in known_revisions():
        raise StateDamaged(
            f"{where(engine)} has schema revision {revision}, which this runtime_ops (head {head}) does not "
            "know: it was written by a newer version; run that version, or restore a backup of this one"
        )


def backup(engine: Engine, dest: Path, settings: Settings) -> Copy:
    """A consistent copy of a SQLite store at `dest` (which must not exist), checked before it is reported."""
    path = sqlite_file(engine)
    if path is None:
        raise ValueError(BACKUP_PG)
    if dest.exists():
        raise FileExistsError(f"{dest} exists: a backup never overwrites a file; name a new one")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial")
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
        # At once: one read transaction, a consistent snapshot (in WAL mode writers go on meanwhile; a stepped copy
        # would restart on every write of another process and might never finish under load).
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
    problem = _quick_check(tmp)
    if problem:
        tmp.unlink(missing_ok=True)
        raise StateDamaged(
            f"the copy of {path} does not check ({problem}); the source may be damaged: {_fix(str(path))}"
        )
    os.replace(tmp, dest)

    revision = current_revision(engine_for(f"sqlite:///{dest}", settings))
    return Copy(dest, dest.stat().st_size, revision)


def restore(engine: Engine, source: Path, settings: Settings) -> Copy:
    """Replace the SQLite store with the backup `source`, once it checks and no process holds the store."""
    path = sqlite_file(engine)
    if path is None:
        raise ValueError(BACKUP_PG)
    if not source.is_file():
        raise FileNotFoundError(f"no backup file {source}")
    try:
        problem = _quick_check(source)
    except _CannotOpen as exc:
        raise StateStoreError(
            f"the backup {source} cannot be opened ({exc}); check that this user may read it"
        ) from None
    if problem:
        raise StateDamaged(f"the backup {source} is damaged ({problem}); choose another one")
    engine.dispose()  # this process's own connections must not count as someone else's
    if path.exists():
        try:
            # Leaving WAL mode needs the only connection to the file: any other process that has it open (a run,
            # the daemon, the API), even idle, makes this fail.
            with contextlib.closing(sqlite3.connect(path, timeout=2, isolation_level=None)) as alone:
                alone.execute("PRAGMA journal_mode=DELETE").fetchone()
        except sqlite3.OperationalError as exc:
            raise RuntimeError(
                f"{path} is in use ({exc}): stop `{command('dev')}`, the API and every run first, then restore"
            ) from None
    tmp = path.with_name(f".{path.name}.restoring")
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
        src.backup(dst)
    for suffix in ("-wal", "-shm"):  # pages of the store being replaced must not be replayed onto the backup
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(tmp, path)
    engine.dispose()
    return Copy(path, path.stat().st_size, current_revision(engine_for(f"sqlite:///{path}", settings)))


def checkpoint(engine: Engine) -> None:
    """Fold the WAL into the SQLite file and empty it (a clean stop leaves one file that is the whole state)."""
    path = sqlite_file(engine)
    if path is None or not path.exists():
        return
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
