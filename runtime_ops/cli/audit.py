"""`runtime-ops audit`: verify the keyed chains against their heads and anchors, anchor, rotate the key, show."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from runtime_ops.cli.common import state_store


def cmd_audit_verify(_: argparse.Namespace) -> int:
    from runtime_ops.approvals.anchors import settings_sink

    sink = settings_sink()
    report = state_store().audit_log.verify(anchors=sink.read())
    if report.ok:
        print(f"audit chain intact: {report.records} records, checked against {report.anchors} anchors ({sink.where})")
        return 0
    print(f"audit chain BROKEN at record {report.first_broken_id}: {report.problem}", file=sys.stderr)
    return 1


def cmd_audit_anchor(_: argparse.Namespace) -> int:
    from runtime_ops.approvals.anchors import anchor_heads, settings_sink

    sink = settings_sink()
    anchor = anchor_heads(state_store(), sink)
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
    store, sink = state_store(), settings_sink()
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
    records = state_store().audit_log.records(args.request_id)
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


def register(sub: Any) -> None:
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
