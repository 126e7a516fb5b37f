"""`runtime-ops dev` runs from the checkout: the files it copies and serves are where it looks for them."""

from __future__ import annotations

import argparse

from runtime_ops.cli import build_parser
from runtime_ops.cli.local import CHECKOUT


def test_dev_finds_the_checkouts_dagster_yaml_and_workspace() -> None:
    assert (CHECKOUT / "dagster.yaml").is_file() and (CHECKOUT / "workspace.yaml").is_file()


def test_every_command_group_is_registered() -> None:
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {
        "approvals",
        "retrain",
        "promote",
        "audit",
        "keys",
        "serve",
        "status",
        "db",
        "demo",
        "dev",
    }
