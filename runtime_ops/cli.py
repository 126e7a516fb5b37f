"""`runtime-ops`: decide approvals, manage API keys, inspect state, seed the demo and start the dev stack."""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime_ops.settings import SettingsError, get_settings

if TYPE_CHECKING:  # the store (SQLAlchemy, migrations) loads only for commands that use it
    from runtime_ops.store import StateStore

log = logging.getLogger("runtime_ops.cli")


def _store(pipeline: str | None = None) -> StateStore:
    """The state store, unscoped (every pipeline) unless a pipeline is named."""
    from runtime_ops.store import open_store

    return open_store(get_settings().resolved_database_url, pipeline=pipeline)


def _request_store(request_id: str) -> StateStore:
    """The store scoped to the pipeline that owns `request_id` (unscoped when no such request exists)."""
    store = _store()
    request = store.requests.get_request(request_id)
    return store.scoped(request["pipeline"]) if request is not None else store


def _default_actor() -> str:
    try:
        actor = get_settings().actor
    except SettingsError:
        actor = None  # reported properly when the command runs
    return f"cli:{actor or getpass.getuser()}"


def _print_table(rows: list[dict[str, Any]], cols: Sequence[str]) -> None:
    if not rows:
        print("(none)")
        return
    cells = [[str(r.get(c) if r.get(c) is not None else "-") for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def cmd_approvals_list(args: argparse.Namespace) -> int:
    store = _store(args.pipeline) if args.pipeline else _store()
    rows = store.requests.list_requests(status=args.status)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    for r in rows:
        r["digest"] = r["candidate_digest"][:12]
        r["candidate"] = f"v{r['candidate_version']}"
    _print_table(rows, ["id", "pipeline", "status", "kind", "candidate", "digest", "created_at", "decided_by"])
    return 0


def _operator_key(args: argparse.Namespace) -> str | None:
    if getattr(args, "key_file", None):
        try:
            return Path(args.key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            print(f"error: cannot read --key-file {args.key_file}: {exc.strerror}", file=sys.stderr)
            return None
    key = get_settings().operator_key
    return key.get_secret_value() if key else None


def _authenticate(store: StateStore, args: argparse.Namespace, *, request_id: str | None, action: str) -> str | None:
    """The approver id the operator's key decides as, or None (refusal printed and audited)."""
    from runtime_ops import clock
    from runtime_ops.approvals.operators import OperatorRefused, operator

    try:
        return str(operator(store, _operator_key(args), claimed=args.actor, now=clock.now()).approver)
    except OperatorRefused as exc:
        store.audit_log.append(
            event="attempt",
            request_id=request_id,
            actor=args.actor or _default_actor(),
            channel="cli",
            outcome="unauthenticated",
            detail={"action": action, "message": str(exc), "api_key": exc.key_id},
            now=clock.now(),
        )
        print(f"error: {exc}", file=sys.stderr)
        return None


def _decide(args: argparse.Namespace, approve: bool) -> int:
    from runtime_ops import clock
    from runtime_ops.decisions.decide import decide

    store = _request_store(args.request_id)
    actor = _authenticate(store, args, request_id=args.request_id, action="approve" if approve else "reject")
    if actor is None:
        return 1
    request = store.requests.get_request(args.request_id)
    if request is not None and request["status"] == "pending":
        report = store.evaluations.get_eval_report(request["eval_report_id"])
        if report:
            print(report["markdown"])
            print(f"\nverdict: {report['verdict']['reason']}\n")
    outcome = decide(
        store,
        args.request_id,
        actor=actor,
        vote="approve" if approve else "reject",
        channel="cli",
        reason=args.reason,
        now=clock.now(),
    )
    print(outcome.message)
    if outcome.decided and approve:
        print("The approvals sensor launches the promotion run on its next tick (run key = approval id).")
    return 0 if outcome.counted else 1


def cmd_retrain(args: argparse.Namespace) -> int:
    """Ask the pipeline's corpus sensor for one retrain; the request names the authenticated operator, who then
    cannot approve the candidate it produces (four eyes)."""
    from runtime_ops.components.loading import get_spec
    from runtime_ops.models.sensors import request_retrain

    store = _store(get_spec(args.pipeline).name)
    actor = _authenticate(store, args, request_id=None, action="retrain")
    if actor is None:
        return 1
    request_id = request_retrain(store, reason=args.reason, requested_by=actor)
    print(
        f"retrain request #{request_id} for {store.pipeline} by {actor}: the corpus sensor launches it on its next tick"
    )
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    """Promote the approved candidate (the same saga as production_model), or print what it would change."""
    from runtime_ops.approvals.gate import PromotionRefused, verify_promotion
    from runtime_ops.components.loading import get_spec
    from runtime_ops.locks.factory import open_locker
    from runtime_ops.models.promotion import LOCK_TTL_MS, LOCK_WAIT_S, StoreJournal, lock_name, promotion_steps, saga_id
    from runtime_ops.saga.engine import plan, run
    from runtime_ops.vectors.factory import pipeline_vector_store

    if args.approval and not args.pipeline:
        store = _request_store(args.approval)
    else:
        store = _store(get_spec(args.pipeline).name)
    try:
        version, request = verify_promotion(store, approval_id=args.approval)
    except PromotionRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    vectors = pipeline_vector_store(get_spec(store.pipeline).vector_store)
    if args.dry_run:
        print(f"dry run: promoting candidate v{version} ({request['id']}) would make these transitions:")
        steps = promotion_steps(store, vectors, version=version, request=request, fence=None, run_id=None)
        for line in plan(steps, {}):
            print(f"  - {line}")
        print("nothing was changed")
        return 0
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    with open_locker(get_settings()).hold(lock_name(store.pipeline), ttl_ms=LOCK_TTL_MS, wait_s=LOCK_WAIT_S) as lease:
        steps = promotion_steps(
            store, vectors, version=version, request=request, fence=lease.fence, run_id=None, log=print
        )
        outcome = run(
            saga_id(request), steps, {}, StoreJournal(store, "cli"), resume=not args.compensate, on_event=print
        )
    print(f"saga {outcome.saga_id}: {outcome.status}")
    return 0 if outcome.status == "done" or (args.compensate and outcome.status == "compensated") else 1


def cmd_audit_verify(_: argparse.Namespace) -> int:
    from runtime_ops.approvals.anchors import settings_sink

    sink = settings_sink()
    report = _store().audit_log.verify(anchors=sink.read())
    if report.ok:
        print(f"audit chain intact: {report.records} records, checked against {report.anchors} anchors ({sink.where})")
        return 0
    print(f"audit chain BROKEN at record {report.first_broken_id}: {report.problem}", file=sys.stderr)
    return 1


def cmd_audit_anchor(_: argparse.Namespace) -> int:
    from runtime_ops.approvals.anchors import anchor_heads, settings_sink

    sink = settings_sink()
    anchor = anchor_heads(_store(), sink)
    if anchor is None:
        print(f"nothing to anchor: every chain's head is already in {sink.where}")
    else:
        print(f"anchored the heads of {len(anchor.heads)} chains in {sink.where} at {anchor.at}")
    return 0


def cmd_audit_rekey(args: argparse.Namespace) -> int:
    """Rotate the audit key: verify under the current key (RUNTIME_OPS_AUDIT_KEY), re-chain under the new one,
    anchor under the new one."""
    from runtime_ops.approvals.anchors import anchor_log, settings_sink
    from runtime_ops.store.audit import Audit

    try:
        new_key = Path(args.new_key_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        print(f"error: cannot read --new-key-file {args.new_key_file}: {exc.strerror}", file=sys.stderr)
        return 2
    store, sink = _store(), settings_sink()
    try:
        count = store.audit_log.rekey(new_key.encode(), anchors=sink.read())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    anchor_log(Audit(store.engine, None, key=lambda: new_key.encode()), sink)
    print(
        f"re-keyed {count} audit records and anchored them in {sink.where}; set RUNTIME_OPS_AUDIT_KEY to the new "
        "key in every process that writes the audit log before starting them again"
    )
    return 0


def cmd_audit_show(args: argparse.Namespace) -> int:
    records = _store().audit_log.records(args.request_id)
    if not records:
        print(f"no audit records for {args.request_id}")
        return 1
    for r in records:
        detail = {k: v for k, v in (r["detail"] or {}).items() if v not in (None, "", [], {})}
        print(
            f"#{r['id']:<6} {r['at']:%Y-%m-%d %H:%M:%S} {r['event']:<20} {r['outcome'] or '':<16} "
            f"{r['actor'] or '-':<24} {r['channel'] or '-':<9} {json.dumps(detail, default=str) if detail else ''}"
        )
    return 0


def _when(value: Any) -> str | None:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value is not None else None


def cmd_keys_create(args: argparse.Namespace) -> int:
    from runtime_ops.store.api_keys import parse_scopes

    try:
        scopes = parse_scopes(args.scope)
        new = _store().api_keys.create(args.name, scopes, created_by=args.actor, approver=args.approver)
    except ValueError as exc:  # an unknown scope (the message lists the valid ones), an empty or long name
        print(f"error: {exc}", file=sys.stderr)
        return 2
    key = new.info
    extra = {"api_key": key.key_id, "api_key_name": key.name, "scopes": list(key.scopes), "actor": args.actor}
    log.info("api key created", extra=extra)
    # The key alone on stdout (KEY=$(runtime-ops keys create ...)); what it is, on stderr.
    print(new.key)
    print(
        f"Created API key {key.key_id} ({key.name}) with scope(s) {', '.join(key.scopes)}"
        f"{f', deciding as {key.approver}' if key.approver else ''}.\n"
        "This is the only time the key is shown: only its hash is stored, it cannot be shown again.\n"
        f"Send it as 'Authorization: Bearer <key>' (or 'X-API-Key: <key>'); "
        f"revoke it with `runtime-ops keys revoke {key.key_id}`.",
        file=sys.stderr,
    )
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    keys = _store().api_keys.list_keys(include_revoked=not args.active)
    rows = [
        {
            "key_id": k.key_id,
            "name": k.name,
            "scopes": ",".join(k.scopes),
            "created_at": _when(k.created_at),
            "created_by": k.created_by,
            "approver": k.approver,
            "last_used_at": _when(k.last_used_at),
            "revoked_at": _when(k.revoked_at),
        }
        for k in keys
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    _print_table(
        rows, ["key_id", "name", "scopes", "approver", "created_at", "created_by", "last_used_at", "revoked_at"]
    )
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from runtime_ops.store.api_keys import key_id_of

    key_id = key_id_of(args.key_id)
    if key_id is None:
        print(f"error: {args.key_id!r} is not a key id (rok_ and 8 hex digits, as `keys list` shows)", file=sys.stderr)
        return 2
    store = _store()
    before = store.api_keys.get(key_id)
    if before is None:
        print(f"error: no API key {key_id}", file=sys.stderr)
        return 1
    if before.revoked:
        by = f" by {before.revoked_by}" if before.revoked_by else ""
        print(f"API key {key_id} ({before.name}) was already revoked at {_when(before.revoked_at)}{by}")
        return 0
    store.api_keys.revoke(key_id, by=args.actor)
    log.info("api key revoked", extra={"api_key": key_id, "api_key_name": before.name, "actor": args.actor})
    print(f"revoked API key {key_id} ({before.name}): requests with it are refused from now on")
    return 0


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
        store = _store(name)
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


def cmd_db_upgrade(_: argparse.Namespace) -> int:
    _store()
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
    root = Path(__file__).resolve().parent.parent
    home = settings.resolved_home / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "dagster.yaml", home / "dagster.yaml")
    from runtime_ops.components.loading import load_specs

    _store()  # migrate before the first sensor tick
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

    def stop(*_: object) -> None:
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
    return max(p.returncode or 0 for p in procs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runtime-ops", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    approvals = sub.add_parser("approvals", help="list and decide promotion approval requests")
    asub = approvals.add_subparsers(dest="action", required=True)
    p = asub.add_parser("list", help="list approval requests")
    p.add_argument("--status", choices=["pending", "approved", "rejected", "superseded", "expired"])
    p.add_argument("--pipeline", default=None, help="only this pipeline's requests (default: every pipeline)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_approvals_list)
    for name, approve in (("approve", True), ("reject", False)):
        p = asub.add_parser(name, help=f"{name} a pending request")
        p.add_argument("request_id")
        p.add_argument(
            "--as",
            dest="actor",
            default=None,
            help="the approver id you decide as; optional, and only checked: your operator key says who decides",
        )
        p.add_argument(
            "--key-file", default=None, help="file holding your operator key (default: $RUNTIME_OPS_OPERATOR_KEY)"
        )
        p.add_argument("--reason", required=not approve, default=None)
        p.set_defaults(func=lambda a, approve=approve: _decide(a, approve))

    p = sub.add_parser("retrain", help="ask a pipeline for one retrain, as the operator your key names")
    p.add_argument("pipeline")
    p.add_argument("--reason", required=True)
    p.add_argument("--as", dest="actor", default=None, help="optional; only checked against your operator key")
    p.add_argument(
        "--key-file", default=None, help="file holding your operator key (default: $RUNTIME_OPS_OPERATOR_KEY)"
    )
    p.set_defaults(func=cmd_retrain)

    audit = sub.add_parser("audit", help="the keyed, anchored audit log of approvals")
    ausub = audit.add_subparsers(dest="action", required=True)
    p = ausub.add_parser("verify", help="check the chain; names the first broken record")
    p.set_defaults(func=cmd_audit_verify)
    p = ausub.add_parser("anchor", help="copy every chain's head to the anchors (RUNTIME_OPS_AUDIT_ANCHORS)")
    p.set_defaults(func=cmd_audit_anchor)
    p = ausub.add_parser(
        "rekey", help="rotate RUNTIME_OPS_AUDIT_KEY: verify, re-chain under the new key (stop the writers first)"
    )
    p.add_argument("--new-key-file", required=True, help="file holding the new key")
    p.set_defaults(func=cmd_audit_rekey)
    p = ausub.add_parser("show", help="print one request's history")
    p.add_argument("request_id")
    p.set_defaults(func=cmd_audit_show)

    p = sub.add_parser("promote", help="promote the approved candidate (the production_model saga) or --dry-run")
    p.add_argument("--approval", default=None, help="approval request id (default: the current candidate's)")
    p.add_argument("--pipeline", default=None, help="the pipeline (default: the approval's, else the only one)")
    p.add_argument("--dry-run", action="store_true", help="print the transitions; change nothing")
    p.add_argument(
        "--compensate", action="store_true", help="roll back an interrupted promotion instead of finishing it"
    )
    p.set_defaults(func=cmd_promote)

    keys = sub.add_parser("keys", help="API keys of the ops API (scopes: read, decide, search, admin)")
    ksub = keys.add_subparsers(dest="action", required=True)
    p = ksub.add_parser("create", help="create a key and print it (the only time it is shown)")
    p.add_argument("name", help="what or who the key is for (shown in `keys list` and in logs)")
    p.add_argument(
        "--scope",
        action="append",
        required=True,
        metavar="SCOPE",
        help="a scope the key grants: read, decide, search or admin (all of them); repeat or comma-separate",
    )
    p.add_argument(
        "--approver",
        default=None,
        help="the approver id (e.g. a Slack user id) this key decides as; needs --scope decide",
    )
    p.add_argument("--as", dest="actor", default=_default_actor(), help="who creates it (default: cli:$USER)")
    p.set_defaults(func=cmd_keys_create)
    p = ksub.add_parser("list", help="list keys: id, name, scopes, created, last used, revoked (never the secret)")
    p.add_argument("--active", action="store_true", help="leave out revoked keys")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_keys_list)
    p = ksub.add_parser("revoke", help="revoke a key: requests with it are refused from then on")
    p.add_argument("key_id", help="the key id (rok_xxxxxxxx) from `keys list`")
    p.add_argument("--as", dest="actor", default=_default_actor(), help="who revokes it (default: cli:$USER)")
    p.set_defaults(func=cmd_keys_revoke)

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from runtime_ops.observability.logs import configure_logging, log_format

        configure_logging(fmt="console" if args.command == "dev" else log_format(), root=True)
        return int(args.func(args))
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
