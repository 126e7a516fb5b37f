"""`runtime-ops serve`, `status`, `db upgrade|check|backup|restore`, `demo seed`: run and inspect a deployment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runtime_ops.cli import instance
from runtime_ops.cli.common import state_store
from runtime_ops.errors import UserError
from runtime_ops.settings import get_settings
from runtime_ops.tags import CANDIDATE_ALIAS, PRODUCTION_ALIAS


def cmd_serve(args: argparse.Namespace) -> int:
    from runtime_ops.api.app import create_app
    from runtime_ops.api.server import listen, serve

    settings = get_settings()
    sock = listen(args.host, args.port)
    app = create_app(settings)
    instance.record("serve")
    serve(app, settings, sock, log_level=args.log_level)
    return 0


def _shown_database_url() -> str:
    from runtime_ops.observability.redaction import redact_url

    return redact_url(get_settings().resolved_database_url)


def cmd_status(args: argparse.Namespace) -> int:
    from runtime_ops.components.loading import load_specs

    settings = get_settings()
    specs = load_specs(settings)
    state_store()  # reachable and whole, before anything is printed
    if args.pipeline:
        specs = {args.pipeline: specs[args.pipeline]} if args.pipeline in specs else {}
        if not specs:
            print(f"error: no pipeline named {args.pipeline!r}", file=sys.stderr)
            return 2
    print(f"state store : {_shown_database_url()}")
    for name, spec in specs.items():
        store = state_store(name)
        print(f"\npipeline {name} ({spec.source})")
        print(f"  landing     : {spec.landing.uri}")
        print(f"  batches     : {len(store.ledger.batches())} (corpus revision {store.ledger.corpus_revision()})")
        print(f"  documents   : {store.documents.document_counts()}")
        print(f"  models      : {[m['version'] for m in store.registry.models()]}")
        candidate, production = store.registry.alias(CANDIDATE_ALIAS), store.registry.alias(PRODUCTION_ALIAS)
        print(f"  candidate   : {candidate}   production: {production}")
        index = store.indexes.current_index()
        if index:
            behind = store.changes.pending(int(index["synced_seq"]))
            print(
                f"  index       : #{index['id']} model v{index['model_version']} in {index['backend']} "
                f"{index['location']} ({index['n_chunks']} chunks, {behind} changes behind)"
            )
        print(f"  vector store: {spec.vector_store.url or '$' + str(spec.vector_store.url_env)}")
        pending = store.requests.list_requests(status="pending")
        print(f"  pending approvals: {[r['id'] for r in pending]}")
    return 0


def cmd_db_check(_: argparse.Namespace) -> int:
    store = state_store()  # checks (quick_check, schema revision) before anything else, naming the file and the fix
    from runtime_ops.store.migrate import current_revision

    print(f"state store {_shown_database_url()}: whole, schema revision {current_revision(store.engine)}")
    return 0


def cmd_db_backup(args: argparse.Namespace) -> int:
    from runtime_ops.store.engine import engine_for
    from runtime_ops.store.integrity import backup

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
    from runtime_ops.store.engine import engine_for
    from runtime_ops.store.integrity import restore

    settings = get_settings()
    engine = engine_for(settings.resolved_database_url, settings)
    try:
        copy = restore(engine, Path(args.file), settings)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"restored {args.file} into {copy.path} (schema revision {copy.revision}); `runtime-ops audit verify` "
        "checks it (records newer than the backup are gone; anchors taken after it name them as truncated)"
    )
    return 0


def cmd_db_upgrade(_: argparse.Namespace) -> int:
    state_store()
    instance.record("db upgrade")
    print("state store schema is up to date")
    return 0


def cmd_demo_seed(args: argparse.Namespace) -> int:
    from runtime_ops.components.loading import get_spec
    from runtime_ops.demo import corpus_keys, land_corpus
    from runtime_ops.landing import LandingError, open_landing

    dest = args.dest or get_spec("demo").landing.uri
    # Only what is not there yet: `make dev` landed 70%, and the rest is the second batch (landing the same files
    # again would only record them as duplicates).
    try:
        landed = land_corpus(
            open_landing(dest, endpoint_url=get_settings().aws_endpoint_url), subset=args.subset, only_missing=True
        )
    except (LandingError, OSError) as exc:  # the landing cannot be made or written, or holds a link on the way
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot land the demo corpus in {dest}: {reason}; choose a writable landing") from None
    print(f"landed {len(landed)} demo documents in {dest} ({len(corpus_keys()) - len(landed)} were there already)")
    return 0


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in (0, 1], e.g. 0.3")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the ops API (Slack interactions, approval pages, JSON API)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=cmd_serve, instance="starts")

    p = sub.add_parser("status", help="summarise the state store, pipeline by pipeline")
    p.add_argument("--pipeline", default=None, help="only this pipeline (default: every declared one)")
    p.set_defaults(func=cmd_status)
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
    demo = sub.add_parser("demo", help="demo data")
    dmsub = demo.add_subparsers(dest="action", required=True)
    p = dmsub.add_parser("seed", help="copy the demo corpus into the demo pipeline's landing folder or bucket")
    p.add_argument("--dest", default=None, help="where to copy (default: the demo pipeline's landing)")
    p.add_argument("--subset", type=_fraction, default=None, help="fraction of the corpus to copy (0-1)")
    p.set_defaults(func=cmd_demo_seed)
