"""`runtime-ops serve`: the ops API (Slack interactions, approval pages, the JSON API) on one address."""

from __future__ import annotations

import argparse
from typing import Any

from runtime_ops.api.server import listen, serve
from runtime_ops.cli import instance
from runtime_ops.settings import get_settings


def cmd_serve(args: argparse.Namespace) -> int:
    # numpy: kept out of every command's start (runtime_ops.cli imports this module)
    from runtime_ops.api.app import create_app

    settings = get_settings()
    sock = listen(args.host, args.port)
    app = create_app(settings)
    instance.record("serve")
    serve(app, settings, sock, log_level=args.log_level)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the ops API (Slack interactions, approval pages, JSON API)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=cmd_serve, instance="starts")
