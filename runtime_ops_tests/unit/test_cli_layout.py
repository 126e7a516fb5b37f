"""`runtime-ops dev` runs from the checkout: the files it copies and serves are where it looks for them."""

from __future__ import annotations

import argparse
import shutil
import tomllib
from pathlib import Path

import pytest

from runtime_ops.cli import build_parser
from runtime_ops.cli.dev import CHECKOUT, DEV_INSTANCE, STORAGE_VARIABLE


def test_dev_finds_its_instance_and_the_dg_project() -> None:
    assert DEV_INSTANCE.is_file()
    assert tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["dg"]["directory_type"] == "project"
    # `dg dev` runs in the checkout with DAGSTER_HOME there: Dagster warns about a dagster.yaml in its working
    # folder that is not DAGSTER_HOME's.
    assert DEV_INSTANCE == CHECKOUT / "dagster.yaml"


def test_dev_instance_holds_pooled_runs_in_the_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dev instance (DEV_INSTANCE, with its storage in a folder of the test's): a backfill's partition runs
    wait in the run queue for a slot of their pool, below the run limit, instead of in started processes; a pool
    nobody set a limit for (each pipeline's lifecycle pool) admits one run at a time."""
    import dagster as dg
    from dagster._core.instance.config import PoolGranularity
    from dagster._core.run_coordinator import QueuedRunCoordinator

    shutil.copyfile(DEV_INSTANCE, tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv(STORAGE_VARIABLE, str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        config = instance.get_concurrency_config()
        assert config.pool_config.pool_granularity == PoolGranularity.RUN
        assert config.run_queue_config is not None
        assert config.pool_config.default_pool_limit == 1 < config.run_queue_config.max_concurrent_runs


def test_every_command_group_is_registered() -> None:
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {
        "approvals",
        "rollouts",
        "rollback",
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
