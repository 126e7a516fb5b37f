"""`runtime-ops`: decide approvals, manage API keys, inspect state, seed the demo and start the dev stack.

Every command works on the instance it belongs to (`cli/instance.py`). A mistake (a setting, a declaration, an
argument, a state store that is unreachable or damaged) is one line on stderr and the exit status its error names
(`runtime_ops.errors.UserError`: 2, 3 damaged, 4 unreachable); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from runtime_ops.cli import approvals, audit, db, demo, dev, keys, rollouts, serve, status
from runtime_ops.cli.instance import applied
from runtime_ops.errors import UserError
from runtime_ops.observability.logs import configure_logging, log_format


class _Parser(argparse.ArgumentParser):
    """argparse's own mistakes (an unknown command, a missing or bad argument) as one line, like every other
    mistake, with where to read the usage; subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="runtime-ops", description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (approvals, rollouts, audit, keys, serve, status, db, demo, dev):
        commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with applied(getattr(args, "instance", "uses")):
            configure_logging(fmt="console" if args.command == "dev" else log_format(), root=True)
            return int(args.func(args))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
