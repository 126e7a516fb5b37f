"""`runtime-ops`: decide approvals, manage API keys, inspect state, seed the demo and start the dev stack."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from runtime_ops.cli import approvals, audit, keys, local
from runtime_ops.settings import SettingsError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runtime-ops", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (approvals, audit, keys, local):
        commands.register(sub)
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
    except RuntimeError as exc:  # the state store is damaged (StateDamaged): the message names the file and the fix
        from runtime_ops.store.integrity import StateDamaged

        if not isinstance(exc, StateDamaged):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 3
