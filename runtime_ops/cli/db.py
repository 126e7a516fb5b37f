"""`runtime-ops db upgrade|check|backup|restore`: the state store's schema, wholeness, backup and restore."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runtime_ops.cli import instance
from runtime_ops.cli.common import shown_database_url, state_store
from runtime_ops.command_hint import command
from runtime_ops.settings import get_settings
from runtime_ops.store.engine import engine_for
from runtime_ops.store.integrity import backup, restore
from runtime_ops.store.migrate import current_revision


def cmd_db_check(_: argparse.Namespace) -> int:
    store = state_store()  # checks (quick_check, schema revision) before anything else, naming the file and the fix

    print(f"state store {shown_database_url()}: whole, schema revision {current_revision(store.engine)}")
    return 0


def cmd_db_backup(args: argparse.Namespace) -> int:
    settings = get_settings()
    engine = engine_for(settings.resolved_database_url, settings)
    try:
        copy = backup(engine, Path(args.file), settings)
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the backup's folder cannot be made or written
        print(f"error: cannot write the backup {args.file}: {exc.strerror}; choose a writable folder", file=sys.stderr)
        return 2
    print(f"backed up the state store to {copy.path} ({copy.bytes:,} bytes, schema revision {copy.revision}), checked")
    return 0


def cmd_db_restore(args: argparse.Namespace) -> int:
    settings = get_settings()
    engine = engine_for(settings.resolved_database_url, settings)
    try:
        copy = restore(engine, Path(args.file), settings)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"restored {args.file} into {copy.path} (schema revision {copy.revision}); `{command('audit verify')}` "
        "checks it (records newer than the backup are gone; anchors taken after it name them as truncated)"
    )
    return 0


def cmd_db_upgrade(_: argparse.Namespace) -> int:
    state_store()
    instance.record("db upgrade")
    print("state store schema is up to date")
    return 0


def register(sub: Any) -> None:
    db = sub.add_parser("db", help="state store schema")
    dsub = db.add_subparsers(dest="action", required=True)
    p = dsub.add_parser("upgrade", help="migrate the state store to the newest schema")
    p.set_defaults(func=cmd_db_upgrade, instance="starts")
    p = dsub.add_parser("check", help="check the state store is whole (SQLite quick_check, schema revision)")
    p.set_defaults(func=cmd_db_check)
    p = dsub.add_parser("backup", help="a consistent copy of the SQLite state store, while the flow runs")
    p.add_argument("file", help="the backup file to write (must not exist)")
    p.set_defaults(func=cmd_db_backup)
    p = dsub.add_parser("restore", help="put a backup in place of the SQLite state store (stop everything first)")
    p.add_argument("file", help="the backup file")
    p.set_defaults(func=cmd_db_restore, instance="restores")
