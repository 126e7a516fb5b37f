"""Which runtime_ops instance a command works on: its home, its state store and its pipelines folder.

An explicit RUNTIME_OPS_HOME wins. Otherwise the home is the `.runtime_ops/` of the project the command belongs to,
the one `make dev` uses: the nearest folder, from the working directory up, that holds a recorded instance
(`.runtime_ops/instance.json`) or is the runtime_ops project itself (its pyproject.toml); else the checkout the
command is installed from. `runtime-ops dev`, `serve` and `db upgrade` may start a new instance there, and record
in `instance.json` the pipelines folder and the database they run with; every other command uses the instance it
finds, with that folder and database unless its own environment names others, and refuses with one line saying
where it looked when there is none: it never starts a new, empty store of its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from runtime_ops.command_hint import command
from runtime_ops.database_urls import sqlite_path
from runtime_ops.errors import UserError
from runtime_ops.observability.redaction import redact_url
from runtime_ops.settings import get_settings

HOME_DIR = ".runtime_ops"
RECORD = "instance.json"
# The project the CLI is installed from (an editable install: the checkout `make dev` runs in).
CHECKOUT = Path(__file__).resolve().parents[2]
log = logging.getLogger("runtime_ops.cli")


def starters() -> str:
    return f"`make dev` (or `{command('dev')}`), `{command('serve')}` or `{command('db upgrade')}`"


class NoInstance(UserError):
    """No instance where the command looked, or one whose record names what this environment lacks."""


@dataclass(frozen=True)
class Instance:
    home: Path
    explicit: bool  # RUNTIME_OPS_HOME named it
    record: Mapping[str, Any]  # what the instance recorded ({} when it has no record yet)

    @property
    def started(self) -> bool:
        return bool(self.record) or (self.home / "state.db").is_file()


def is_project(folder: Path) -> bool:
    """Whether `folder` is the runtime_ops project (a checkout): its pyproject.toml names it."""
    try:
        project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return project.get("project", {}).get("name") == "runtime-ops"


def read_record(home: Path) -> dict[str, Any]:
    try:
        record = json.loads((home / RECORD).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # no record (a home that is a file is the settings' to refuse)
        return {}
    except (OSError, ValueError) as exc:
        raise NoInstance(
            f"{home / RECORD} cannot be read ({exc}); start the instance again with {starters()}"
        ) from None
    return record if isinstance(record, dict) else {}


def find(cwd: Path, environ: Mapping[str, str], checkout: Path = CHECKOUT) -> Instance | None:
    """The instance a command run in `cwd` belongs to, or None."""
    if environ.get("RUNTIME_OPS_HOME"):
        home = (cwd / Path(environ["RUNTIME_OPS_HOME"]).expanduser()).resolve()
        return Instance(home, True, read_record(home))
    for folder in (cwd, *cwd.parents):
        home = folder / HOME_DIR
        if (home / RECORD).is_file() or is_project(folder):
            return Instance(home, False, read_record(home))
    if is_project(checkout):  # the walk up did not pass it
        return Instance(checkout / HOME_DIR, False, read_record(checkout / HOME_DIR))
    return None


# How a command uses its instance: most use one that runs (or ran); `dev`, `serve` and `db upgrade` may start one;
# `db restore` puts a store back into one whose store may be gone.
Use = Literal["uses", "starts", "restores"]


def locate(cwd: Path, environ: Mapping[str, str], use: Use = "uses", checkout: Path = CHECKOUT) -> dict[str, str]:
    """The variables that point a command at its instance (those `environ` does not set itself); NoInstance when a
    command that may not start one finds none. Explicit settings win: RUNTIME_OPS_HOME names the home, and
    RUNTIME_OPS_DATABASE_URL the store (the home found, if any, then only keeps secrets and anchors)."""
    found = find(cwd, environ, checkout)
    own_database = bool(environ.get("RUNTIME_OPS_DATABASE_URL"))
    if found is None:
        if use != "uses" or own_database:
            return {}  # a new home in the working directory, as RUNTIME_OPS_HOME's default says
        raise NoInstance(
            f"no runtime_ops instance found: looked for {HOME_DIR}/{RECORD} in {cwd} and every folder above it, and "
            f"for the runtime_ops project there and at {checkout}; set RUNTIME_OPS_HOME to the home of the instance, "
            f"or start one here with {starters()}"
        )
    chosen = {} if found.explicit else {"RUNTIME_OPS_HOME": str(found.home)}
    if use == "starts" or (found.explicit and not found.record):
        return chosen  # as the environment says: a new instance, or a test's own home
    if not found.started and not own_database and use == "uses":
        raise NoInstance(
            f"the runtime_ops instance of this project, {found.home}, was never started: start it with {starters()}, "
            "or set RUNTIME_OPS_HOME to the home of another instance"
        )
    recorded_by = f"(recorded by {found.record.get('recorded_by', 'its start')} in {found.home / RECORD})"
    database = found.record.get("database")
    if database and not own_database:
        if not database.startswith("sqlite:"):
            raise NoInstance(
                f"the instance in {found.home} keeps its state in {database} {recorded_by}: set "
                "RUNTIME_OPS_DATABASE_URL to that database's URL here too"
            )
        chosen["RUNTIME_OPS_DATABASE_URL"] = database
    elif not database and not own_database and use == "uses" and not (found.home / "state.db").is_file():
        raise NoInstance(
            f"the state store of the instance in {found.home} is missing ({found.home / 'state.db'}): put a backup "
            f"back with `{command('db restore BACKUP')}`, or start a new one with {starters()}"
        )
    pipelines = found.record.get("pipelines_dir")
    if pipelines and not environ.get("RUNTIME_OPS_PIPELINES_DIR"):
        if not Path(pipelines).is_dir():
            raise NoInstance(
                f"the instance in {found.home} serves the pipelines of {pipelines} {recorded_by}, which is not a "
                "folder any more: set RUNTIME_OPS_PIPELINES_DIR to where they are now"
            )
        chosen["RUNTIME_OPS_PIPELINES_DIR"] = pipelines
    return chosen


@contextlib.contextmanager
def applied(use: Use) -> Iterator[None]:
    """This process's settings (and its children's) pointed at the command's instance while the command runs."""
    chosen = locate(Path.cwd(), os.environ, use)
    before = {name: os.environ.get(name) for name in chosen}
    os.environ.update(chosen)
    get_settings.cache_clear()
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        get_settings.cache_clear()


def record(by: str) -> Path | None:
    """Record what the instance of this process's settings runs with, for the commands run elsewhere later: its
    pipelines folder and its database (a SQLite path; any other database without its password)."""
    settings = get_settings()
    home = settings.resolved_home
    database = None
    if settings.database_url:
        path = sqlite_path(settings.database_url)
        if path is None:
            database = redact_url(settings.database_url)
        elif path.resolve() != home / "state.db":
            database = f"sqlite:///{path.resolve()}"
    entry = {
        "pipelines_dir": str(settings.pipelines_dir.expanduser().resolve()) if settings.pipelines_dir else None,
        "database": database,
        "recorded_by": f"runtime-ops {by}",
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        home.mkdir(parents=True, exist_ok=True)
        tmp = home / f".{RECORD}.{os.getpid()}"
        tmp.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, home / RECORD)
    except OSError as exc:  # a read-only home: the instance runs; commands elsewhere need RUNTIME_OPS_HOME set
        log.warning("could not record the instance in %s (%s): commands run elsewhere will not find it", home, exc)
        return None
    return home / RECORD
