"""`runtime-ops keys`: create (printed once), list and revoke the ops API's scoped keys."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from runtime_ops.cli.common import default_actor, log, print_table, state_store, when
from runtime_ops.command_hint import command
from runtime_ops.store.operations.api_keys import key_id_of, parse_scopes


def cmd_keys_create(args: argparse.Namespace) -> int:
    try:
        scopes = parse_scopes(args.scope)
        new = state_store().api_keys.create(args.name, scopes, created_by=args.actor, approver=args.approver)
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
        f"revoke it with `{command(f'keys revoke {key.key_id}')}`.",
        file=sys.stderr,
    )
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    keys = state_store().api_keys.list_keys(include_revoked=not args.active)
    rows = [
        {
            "key_id": k.key_id,
            "name": k.name,
            "scopes": ",".join(k.scopes),
            "created_at": when(k.created_at),
            "created_by": k.created_by,
            "approver": k.approver,
            "last_used_at": when(k.last_used_at),
            "revoked_at": when(k.revoked_at),
        }
        for k in keys
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print_table(
        rows, ["key_id", "name", "scopes", "approver", "created_at", "created_by", "last_used_at", "revoked_at"]
    )
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    key_id = key_id_of(args.key_id)
    if key_id is None:
        print(f"error: {args.key_id!r} is not a key id (rok_ and 8 hex digits, as `keys list` shows)", file=sys.stderr)
        return 2
    store = state_store()
    before = store.api_keys.get(key_id)
    if before is None:
        print(f"error: no API key {key_id}", file=sys.stderr)
        return 1
    if before.revoked:
        by = f" by {before.revoked_by}" if before.revoked_by else ""
        print(f"API key {key_id} ({before.name}) was already revoked at {when(before.revoked_at)}{by}")
        return 0
    store.api_keys.revoke(key_id, by=args.actor)
    log.info("api key revoked", extra={"api_key": key_id, "api_key_name": before.name, "actor": args.actor})
    print(f"revoked API key {key_id} ({before.name}): requests with it are refused from now on")
    return 0


def register(sub: Any) -> None:
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
    p.add_argument("--as", dest="actor", default=default_actor(), help="who creates it (default: cli:$USER)")
    p.set_defaults(func=cmd_keys_create)
    p = ksub.add_parser("list", help="list keys: id, name, scopes, created, last used, revoked (never the secret)")
    p.add_argument("--active", action="store_true", help="leave out revoked keys")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_keys_list)
    p = ksub.add_parser("revoke", help="revoke a key: requests with it are refused from then on")
    p.add_argument("key_id", help="the key id (rok_xxxxxxxx) from `keys list`")
    p.add_argument("--as", dest="actor", default=default_actor(), help="who revokes it (default: cli:$USER)")
    p.set_defaults(func=cmd_keys_revoke)
