"""`runtime-ops serve`, `status`, `db upgrade`, `demo seed`, `dev`: run and inspect a deployment."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from runtime_ops.cli.common import state_store
from runtime_ops.settings import get_settings

# The checkout `runtime-ops dev` runs from: its dagster.yaml and workspace.yaml.
CHECKOUT = Path(__file__).resolve().parents[2]


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from runtime_ops.api.app import create_app

    # log_config=None: uvicorn keeps its hands off logging; its loggers go through ours (configured in main).
    uvicorn.run(
        create_app(), host=args.host, port=args.port, log_level=args.log_level, access_log=False, log_config=None
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from runtime_ops.components.loading import load_specs

    settings = get_settings()
    specs = load_specs(settings)
    if args.pipeline:
        specs = {args.pipeline: specs[args.pipeline]} if args.pipeline in specs else {}
        if not specs:
            print(f"error: no pipeline named {args.pipeline!r}", file=sys.stderr)
            return 2
    print(f"state store : {settings.resolved_database_url}")
    for name, spec in specs.items():
        store = state_store(name)
        print(f"\npipeline {name} ({spec.source})")
        print(f"  landing     : {spec.landing.uri}")
        print(f"  batches     : {len(store.ledger.batches())} (corpus revision {store.ledger.corpus_revision()})")
        print(f"  documents   : {store.documents.document_counts()}")
        print(f"  models      : {[m['version'] for m in store.registry.models()]}")
        candidate, production = store.registry.alias("candidate"), store.registry.alias("production")
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

    print(
        f"state store {get_settings().resolved_database_url}: whole, schema revision {current_revision(store.engine)}"
    )
    return 0


def cmd_db_backup(args: argparse.Namespace) -> int:
    from runtime_ops.store.engine import engine_for
    from runtime_ops.store.integrity import backup

    engine = engine_for(get_settings().resolved_database_url)
    try:
        copy = backup(engine, Path(args.file))
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"backed up the state store to {copy.path} ({copy.bytes:,} bytes, schema revision {copy.revision}), checked")
    return 0


def cmd_db_restore(args: argparse.Namespace) -> int:
    from runtime_ops.store.engine import engine_for
    from runtime_ops.store.integrity import restore

    engine = engine_for(get_settings().resolved_database_url)
    try:
        copy = restore(engine, Path(args.file))
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
    print("state store schema is up to date")
    return 0


def cmd_demo_seed(args: argparse.Namespace) -> int:
    from runtime_ops.components.loading import get_spec
    from runtime_ops.demo import copy_corpus

    dest = args.dest or get_spec("demo").landing.uri
    if dest.startswith("s3://"):
        from runtime_ops.demo import CORPUS_DIR
        from runtime_ops.landing import open_landing

        source = open_landing(dest, endpoint_url=get_settings().aws_endpoint_url)
        files = sorted(p for p in CORPUS_DIR.rglob("*") if p.is_file())
        for p in files:
            source.put(p.relative_to(CORPUS_DIR).as_posix(), p.read_bytes())
        print(f"put {len(files)} demo documents into {dest}")
        return 0
    copied = copy_corpus(Path(dest), subset=args.subset)
    print(f"copied {len(copied)} demo documents into {dest}")
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    """Prepare DAGSTER_HOME under RUNTIME_OPS_HOME, seed the demo data, run the ops API and `dagster dev`."""
    import signal
    import subprocess

    settings = get_settings()
    root = CHECKOUT
    home = settings.resolved_home / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "dagster.yaml", home / "dagster.yaml")
    from runtime_ops.components.loading import load_specs

    store = state_store()  # check and migrate before the first sensor tick
    demo = load_specs(settings).get("demo")  # a folder of one's own pipelines may have no demo
    if demo is not None and not args.no_seed and not demo.landing.is_s3:
        from runtime_ops.demo import copy_corpus

        landing = Path(demo.landing.uri)
        empty = not landing.exists() or not any(p.is_file() for p in landing.rglob("*"))
        if empty:
            # Most of the corpus now, the rest with `runtime-ops demo seed`: that second batch trains a new
            # candidate and shows the gate at work.
            copied = copy_corpus(landing, subset=0.7)
            print(f"seeded {len(copied)} demo documents into {landing}; `runtime-ops demo seed` lands the rest")
    _fail_orphans(home)
    env = {**os.environ, "DAGSTER_HOME": str(home), "RUNTIME_OPS_HOME": str(settings.resolved_home)}
    # Readable log lines on a developer's terminal unless JSON was asked for explicitly.
    env.setdefault("RUNTIME_OPS_LOG_FORMAT", "console")
    api_host, api_port = args.api_host, args.api_port
    if not settings.alert_token and api_host in ("127.0.0.1", "localhost", "::1"):
        # On this machine only: alerts may be posted without a token (anywhere else set RUNTIME_OPS_ALERT_TOKEN).
        env.setdefault("RUNTIME_OPS_ALERT_OPEN", "true")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "runtime_ops.cli", "serve", "--host", api_host, "--port", str(api_port)],
            env=env,
            cwd=root,
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dagster",
                "dev",
                "-w",
                str(root / "workspace.yaml"),
                "-h",
                args.host,
                "-p",
                str(args.port),
            ],
            env=env,
            cwd=root,
        ),
    ]
    print(
        f"Dagster UI: http://{args.host}:{args.port}   ops API: http://{api_host}:{api_port}   (DAGSTER_HOME={home})",
        flush=True,
    )

    asked: list[int] = []  # the signal that asked us to stop, if one did

    def stop(signum: int = 0, *_: object) -> None:
        if signum:
            asked.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while all(p.poll() is None for p in procs):
            try:
                procs[1].wait(timeout=1)
            except subprocess.TimeoutExpired:
                continue
    finally:
        stop()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    from runtime_ops.store.integrity import checkpoint

    checkpoint(store.engine)  # the state file alone is then the whole state (a copy of it is a backup)
    if asked:
        print("stopped cleanly: the state store's WAL is folded into its file", flush=True)
        return 0
    return max(p.returncode or 0 for p in procs)


def _fail_orphans(home: Path) -> None:
    """Runs the last `runtime-ops dev` left started (it was killed, or the machine lost power) are marked failed
    before anything starts, so that run retries relaunch them at once (run_recovery_sensor would, a tick later)."""
    if not (home / "history").exists():  # Dagster's SQLite run storage: no runs yet
        return
    import dagster as dg

    from runtime_ops.recovery.orphans import sweep

    with dg.DagsterInstance.from_config(str(home)) as instance:
        orphans = sweep(instance)
    for o in orphans:
        print(f"run {o.run_id} ({o.job_name}) was interrupted ({o.reason}): marked failed; run retries relaunch it")


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the ops API (Slack interactions, approval pages, JSON API)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("status", help="summarise the state store, pipeline by pipeline")
    p.add_argument("--pipeline", default=None, help="only this pipeline (default: every declared one)")
    p.set_defaults(func=cmd_status)
    db = sub.add_parser("db", help="state store schema")
    dsub = db.add_subparsers(dest="action", required=True)
    p = dsub.add_parser("upgrade", help="migrate the state store to the newest schema")
    p.set_defaults(func=cmd_db_upgrade)
    p = dsub.add_parser("check", help="check the state store is whole (SQLite quick_check, schema revision)")
    p.set_defaults(func=cmd_db_check)
    p = dsub.add_parser("backup", help="a consistent copy of the SQLite state store, while the flow runs")
    p.add_argument("file", help="the backup file to write (must not exist)")
    p.set_defaults(func=cmd_db_backup)
    p = dsub.add_parser("restore", help="put a backup in place of the SQLite state store (stop everything first)")
    p.add_argument("file", help="the backup file")
    p.set_defaults(func=cmd_db_restore)
    demo = sub.add_parser("demo", help="demo data")
    dmsub = demo.add_subparsers(dest="action", required=True)
    p = dmsub.add_parser("seed", help="copy the demo corpus into the demo pipeline's landing folder or bucket")
    p.add_argument("--dest", default=None, help="where to copy (default: the demo pipeline's landing)")
    p.add_argument("--subset", type=float, default=None, help="fraction of the corpus to copy (0-1)")
    p.set_defaults(func=cmd_demo_seed)
    p = sub.add_parser("dev", help="start the Dagster UI and daemon on the embedded defaults")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.add_argument("--no-seed", action="store_true", help="do not copy the demo corpus into an empty landing")
    p.add_argument("--api-host", default="127.0.0.1")
    p.add_argument("--api-port", type=int, default=8000)
    p.set_defaults(func=cmd_dev)
