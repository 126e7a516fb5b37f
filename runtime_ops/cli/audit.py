"""`runtime-ops audit`: verify the keyed chains against their heads, anchors and the state they audit; anchor,
rotate the key, show.

Exit status: 0 done (verify: intact); 1 the log is not shown intact (a broken chain, state without its records,
a wrong key, anchors missing, empty or unreadable); 2 the command cannot run as asked (no audit key, anchors that
cannot be written, an unknown request), one line on stderr; 3 the state store is damaged (`runtime-ops db`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime_ops.approvals.anchors import AnchorsUnavailable, anchor_log, read_anchors, settings_sink
from runtime_ops.cli.common import state_store
from runtime_ops.command_hint import command
from runtime_ops.settings import SettingsError, get_settings
from runtime_ops.store.approvals.audit import Audit, settings_key
from runtime_ops.store.approvals.chain import Anchor, key_id, newest_keyed

if TYPE_CHECKING:
    from runtime_ops.approvals.anchors import AnchorSink

_NO_ANCHORS_HELP = "check without the anchors (a log cut short together with its heads then goes unseen)"


def _key(sink: AnchorSink) -> bytes | None:
    """The audit key, never created here: without it, one line naming the fix (and the key id the newest anchor
    was taken under, when the anchors say) and None."""
    try:
        return settings_key(get_settings())
    except SettingsError as exc:
        print(f"error: {exc}{_anchored_key_id(sink)}", file=sys.stderr)
        return None


def _anchored_key_id(sink: AnchorSink) -> str:
    try:
        newest = newest_keyed(sink.read())
    except AnchorsUnavailable:
        return ""
    return "" if newest is None else f" (the newest anchor was taken under key id {newest.kid})"


def _log(key: bytes) -> Audit:
    return Audit(state_store().engine, None, key=lambda: key)


def cmd_audit_verify(args: argparse.Namespace) -> int:
    sink = settings_sink()
    key = _key(sink)
    if key is None:
        return 2
    anchors: list[Anchor] = []
    unavailable = None
    if not args.no_anchors:
        try:
            anchors = read_anchors(sink)
        except AnchorsUnavailable as exc:
            unavailable = str(exc)
    report = _log(key).verify(anchors=anchors)
    if report.wrong_key:
        print(f"audit log NOT VERIFIED: {report.problem}", file=sys.stderr)
        return 1
    if not report.ok:
        at = f" at record {report.first_broken_id}" if report.first_broken_id is not None else ""
        print(f"audit chain BROKEN{at}: {report.problem}", file=sys.stderr)
        return 1
    if unavailable is not None:
        print(
            f"audit log NOT VERIFIED: {unavailable}; without its anchors a log cut short with its heads cannot be "
            "told (restore them or point RUNTIME_OPS_AUDIT_ANCHORS at them; --no-anchors checks without them)",
            file=sys.stderr,
        )
        return 1
    checked = "anchors not checked (--no-anchors)" if args.no_anchors else f"checked against {report.anchors} anchors"
    print(f"audit chain intact: {report.records} records under key id {key_id(key)}, {checked} ({sink.where})")
    return 0


def cmd_audit_anchor(_: argparse.Namespace) -> int:
    sink = settings_sink()
    key = _key(sink)
    if key is None:
        return 2
    try:
        anchor = anchor_log(_log(key), sink)
    except AnchorsUnavailable as exc:
        print(f"error: {exc} (RUNTIME_OPS_AUDIT_ANCHORS: a writable file or s3://bucket/prefix)", file=sys.stderr)
        return 2
    if anchor is None:
        print(f"nothing to anchor: every chain's head is already in {sink.where}")
    elif not anchor.heads:
        print(f"anchored the empty audit log in {sink.where} at {anchor.at}")
    else:
        print(f"anchored the heads of {len(anchor.heads)} chains in {sink.where} at {anchor.at}")
    return 0


def cmd_audit_rekey(args: argparse.Namespace) -> int:
    """Rotate the audit key: verify under the current key (RUNTIME_OPS_AUDIT_KEY), re-chain under the new one,
    anchor under the new one."""
    try:
        new_key = Path(args.new_key_file).read_text(encoding="utf-8").strip().encode()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        print(f"error: cannot read --new-key-file {args.new_key_file}: {why}", file=sys.stderr)
        return 2
    if not new_key:
        print(f"error: --new-key-file {args.new_key_file} is empty; write the new key into it", file=sys.stderr)
        return 2
    sink = settings_sink()
    key = _key(sink)
    if key is None:
        return 2
    anchors: list[Anchor] = []
    if not args.no_anchors:
        try:
            anchors = read_anchors(sink)
        except AnchorsUnavailable as exc:
            print(
                f"error: {exc}; the log is not re-keyed without being checked against them (--no-anchors to)",
                file=sys.stderr,
            )
            return 1
    log = _log(key)
    try:
        count = log.rekey(new_key, anchors=anchors)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        anchor_log(Audit(log.engine, None, key=lambda: new_key), sink)
    except AnchorsUnavailable as exc:
        print(
            f"error: re-keyed {count} audit records, but {exc}; set the new key and run `{command('audit anchor')}`",
            file=sys.stderr,
        )
        return 2
    print(
        f"re-keyed {count} audit records and anchored them in {sink.where}; set RUNTIME_OPS_AUDIT_KEY to the new "
        "key in every process that writes the audit log before starting them again"
    )
    return 0


def cmd_audit_show(args: argparse.Namespace) -> int:
    records = state_store().audit_log.records(args.request_id)
    if not records:
        print(
            f"error: no audit records for {args.request_id}; `{command('approvals list')}` shows the requests",
            file=sys.stderr,
        )
        return 2
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
    p = ausub.add_parser(
        "verify", help="check the chains, their heads and anchors, and that the state they audit has its records"
    )
    p.add_argument("--no-anchors", action="store_true", help=_NO_ANCHORS_HELP)
    p.set_defaults(func=cmd_audit_verify)
    p = ausub.add_parser("anchor", help="copy every chain's head to the anchors (RUNTIME_OPS_AUDIT_ANCHORS)")
    p.set_defaults(func=cmd_audit_anchor)
    p = ausub.add_parser(
        "rekey", help="rotate RUNTIME_OPS_AUDIT_KEY: verify, re-chain under the new key (stop the writers first)"
    )
    p.add_argument("--new-key-file", required=True, help="file holding the new key")
    p.add_argument("--no-anchors", action="store_true", help=_NO_ANCHORS_HELP)
    p.set_defaults(func=cmd_audit_rekey)
    p = ausub.add_parser("show", help="print one request's history")
    p.add_argument("request_id")
    p.set_defaults(func=cmd_audit_show)
