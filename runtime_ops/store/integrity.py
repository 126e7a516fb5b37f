"""Is the state store whole, and a consistent copy of it: integrity checks, backup and restore.

A SQLite state file that was truncated or overwritten can still open (the WAL holds recent pages) and answer a
`SELECT 1`, then fail a job later with "database disk image is malformed". `check` runs SQLite's
`quick_check` and compares the schema revision with this code's; `StateDamaged` names the file and the fix.
`backup` copies a live SQLite store with SQLite's online backup API (a consistent snapshot, WAL included,
while writers go on); `restore` puts a checked copy in place once nothing holds the file. PostgreSQL keeps
its own integrity and is backed up with `pg_dump` (`BACKUP_PG`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, text

BACKUP_PG = (
    'the state store is PostgreSQL: back it up with `pg_dump --format=custom --file=state.dump "$URL"` and '
    'restore with `pg_restore --clean --if-exists --dbname="$URL" state.dump` (both consistent while runs write)'
)


class StateDamaged(RuntimeError):
    """The state store cannot be trusted; the message names the file (or database) and the fix."""


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
        f"stop every runtime_ops process, then restore the newest backup (`runtime-ops db restore BACKUP`; backups "
        f"are made with `runtime-ops db backup FILE`), or move {where} and its -wal/-shm files aside to start empty"
    )


def _quick_check(path: Path) -> str | None:
    """SQLite's quick_check of `path`, or the error opening it raised; None when it is whole."""
    try:
        uri = f"{path.resolve().as_uri()}?mode=ro"  # percent-encoded: a path with '?' or '#' stays a path
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(rows)


def check(engine: Engine, head: str) -> None:
    """Raise StateDamaged unless the store answers, is whole (SQLite: quick_check) and its schema revision is one
    this code knows (`head` or an older one the migrations bring up; a newer one means a newer runtime_ops)."""
    from runtime_ops.store.migrate import current_revision, known_revisions

    path = sqlite_file(engine)
    where = str(path) if path else engine.url.render_as_string(hide_password=True)
    if path is not None and path.exists():
        problem = _quick_check(path)
        if problem:
            raise StateDamaged(f"the state file {path} is damaged ({problem}): {_fix(str(path))}")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        revision = current_revision(engine)
    except Exception as exc:
        raise StateDamaged(
            f"the state store {where} cannot be read ({type(exc).__name__}: {exc}): {_fix(where)}"
        ) from exc
    if revision is not None and revision not in known_revisions():
        raise StateDamaged(
            f"the state store {where} has schema revision {revision}, which this runtime_ops (head {head}) does not "
            "know: it was written by a newer version; run that version, or restore a backup of this one"
        )


def backup(engine: Engine, dest: Path) -> Copy:
    """A consistent copy of a SQLite store at `dest` (which must not exist), checked before it is reported."""
    from runtime_ops.store.migrate import current_revision

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
    from runtime_ops.store.engine import engine_for

    revision = current_revision(engine_for(f"sqlite:///{dest}"))
    return Copy(dest, dest.stat().st_size, revision)


def restore(engine: Engine, source: Path) -> Copy:
    """Replace the SQLite store with the backup `source`, once it checks and no process holds the store."""
    from runtime_ops.store.engine import engine_for
    from runtime_ops.store.migrate import current_revision

    path = sqlite_file(engine)
    if path is None:
        raise ValueError(BACKUP_PG)
    if not source.is_file():
        raise FileNotFoundError(f"no backup file {source}")
    problem = _quick_check(source)
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
                f"{path} is in use ({exc}): stop `runtime-ops dev`, the API and every run first, then restore"
            ) from None
    tmp = path.with_name(f".{path.name}.restoring")
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
        src.backup(dst)
    for suffix in ("-wal", "-shm"):  # pages of the store being replaced must not be replayed onto the backup
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(tmp, path)
    engine.dispose()
    return Copy(path, path.stat().st_size, current_revision(engine_for(f"sqlite:///{path}")))


def checkpoint(engine: Engine) -> None:
    """Fold the WAL into the SQLite file and empty it (a clean stop leaves one file that is the whole state)."""
    path = sqlite_file(engine)
    if path is None or not path.exists():
        return
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
