"""`runtime-ops dev` runs from the checkout: the files it copies and serves are where it looks for them."""

from __future__ import annotations

import argparse
import tomllib

from runtime_ops.cli import build_parser
from runtime_ops.cli.local import CHECKOUT, DEV_INSTANCE


def test_dev_finds_its_instance_and_the_dg_project() -> None:
    assert DEV_INSTANCE.is_file()
    assert tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["dg"]["directory_type"] == "project"
    # `dg dev` runs in the checkout: a dagster.yaml there would be ignored by Dagster, with a warning.
    assert not (CHECKOUT / "dagster.yaml").exists()


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
