"""The state store's database URL: normalised to SQLAlchemy's spelling, and a SQLite file's path and folder checked."""

from __future__ import annotations

from pathlib import Path


def normalise_database_url(url: str) -> str:
    """A SQLAlchemy URL for the state store (`postgres://` accepted as PostgreSQL's usual spelling)."""
    if not url.startswith(("sqlite:", "postgresql:", "postgresql+psycopg2:", "postgres:")):
        raise ValueError("must be a SQLAlchemy URL such as postgresql://user:pw@host:5432/db or sqlite:///path")
    if url.startswith("postgres:"):
        url = "postgresql:" + url[len("postgres:") :]
    return url


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (`sqlite:///relative`, `sqlite:////absolute`); None for other databases and for
    an in-memory one."""
    if not url.startswith("sqlite:"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    return Path(database).expanduser() if database and database != ":memory:" else None


def check_sqlite_folder(url: str, home: Path) -> None:
    """A SQLite state file's folder must exist, unless it is the home (RUNTIME_OPS_HOME), created on first use: a
    mistyped path would otherwise become a new, empty store."""
    path = sqlite_path(url)
    if path is None or path.parent.is_dir() or path.parent.resolve() == home.expanduser().resolve():
        return
    raise ValueError(
        f"the folder {path.parent} of the SQLite file {path} does not exist; correct the path, or create the folder "
        f"(mkdir -p {path.parent}) for a new state store there"
    )
