"""Promotion as a saga on a real PostgreSQL and Redis: dry run, failure at each step, crash between steps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime_ops.cli import main as cli
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate
from runtime_ops_tests.support.recovery_report import report_recovery

pytestmark = pytest.mark.slow(seconds=98)  # alone on 2 cores (Dec 2026): started first, see conftest.py


def _registry(store) -> dict:  # type: ignore[no-untyped-def]
    return {name: store.registry.alias(name) for name in ("production", "retrieval_index", "candidate")}


@pytest.fixture
def approved(env, postgres_url, redis_url, dagster_instance, tmp_path):  # type: ignore[no-untyped-def]
    """Production v1 and an approved candidate v2 whose promotion has not run yet."""
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), REDIS_URL=redis_url, **NEEDS_A_HUMAN)
    store, pending, flow = pending_candidate(landing, dagster_instance)
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0
    return store, pending, flow


def test_dry_run_prints_transitions_and_changes_nothing(approved, capsys) -> None:  # type: ignore[no-untyped-def]
    store, pending, _ = approved
    before = _registry(store)
    capsys.readouterr()
    assert cli(["promote", "--dry-run", "--approval", pending["id"]]) == 0
    out = capsys.readouterr().out
    assert "production: v1 -> v2" in out and "retrieval_index" in out and "nothing was changed" in out
    assert _registry(store) == before and store.sagas.load_saga(f"promote-{pending['id']}") is None


@pytest.mark.parametrize("step", ["promotion.alias", "promotion.index", "promotion.announce"])
def test_a_failure_at_each_step_leaves_the_registry_as_before(approved, monkeypatch, step, capsys) -> None:  # type: ignore[no-untyped-def]
    store, pending, _ = approved
    before = _registry(store)
    monkeypatch.setenv("RUNTIME_OPS_FAILPOINTS", f"{step}=raise")
    with pytest.raises(Exception, match="completed steps were compensated"):
        cli(["promote", "--approval", pending["id"]])
    assert _registry(store) == before
    assert store.sagas.load_saga(f"promote-{pending['id']}")["status"] == "compensated"
    monkeypatch.delenv("RUNTIME_OPS_FAILPOINTS")
    assert cli(["promote", "--approval", pending["id"]]) == 0  # a later attempt promotes, once
    assert store.registry.alias("production") == 2 and store.indexes.current_index()["model_version"] == 2


@pytest.mark.parametrize("how", ["finish", "compensate"])
def test_a_crash_between_steps_is_finished_or_compensated_by_the_next_run(approved, how, capsys) -> None:  # type: ignore[no-untyped-def]
    store, pending, _ = approved
    before = _registry(store)
    crashed = subprocess.run(
        [sys.executable, "-m", "runtime_ops.cli", "promote", "--approval", pending["id"]],
        env={**os.environ, "RUNTIME_OPS_FAILPOINTS": "promotion.index=crash"},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == 137, crashed.stderr
    saga = store.sagas.load_saga(f"promote-{pending['id']}")
    assert saga["status"] == "running" and [s["name"] for s in saga["steps"]] == ["move_production_alias"]
    assert store.registry.alias("production") == 2  # the crash left the first step done and nothing compensated
    started = time.monotonic()
    if how == "finish":
        assert cli(["promote", "--approval", pending["id"]]) == 0
        assert store.registry.alias("production") == 2 and store.indexes.current_index()["model_version"] == 2
        assert store.sagas.load_saga(f"promote-{pending['id']}")["status"] == "done"
        history = [h["new_target"] for h in store.registry.alias_history("production")]
        assert history == [1, 2]  # moved once, never twice
    else:
        assert cli(["promote", "--approval", pending["id"], "--compensate"]) == 0
        assert _registry(store) == before
        assert store.sagas.load_saga(f"promote-{pending['id']}")["status"] == "compensated"
    # The dead holder's lease must run out first (LOCK_TTL_MS): that is the recovery time.
    report_recovery(capsys, f"a crash mid-promotion, then `runtime-ops promote` ({how})", time.monotonic() - started)


def test_the_promotion_run_uses_the_saga_and_downstream_reuses_its_index(approved) -> None:  # type: ignore[no-untyped-def]
    store, pending, flow = approved
    [request] = flow.tick("approvals_sensor")
    result = flow.run("approvals_sensor", request)
    assert result.success
    meta = result.asset_materializations_for_node("demo__production_model")[0].metadata
    assert meta["saga"].value == f"promote-{pending['id']}" and meta["fence"].value > 0
    index_meta = result.asset_materializations_for_node("demo__retrieval_index")[0].metadata
    # The saga filled v2's index and swapped the alias; the assets after it find it complete and reuse it.
    assert index_meta["model_version"].value == 2
    assert (
        index_meta["index_id"].value == index_meta["previous_index_id"].value == store.registry.alias("retrieval_index")
    )
    embed_meta = result.asset_materializations_for_node("demo__document_embeddings")[0].metadata
    assert embed_meta["filled"].value is False and embed_meta["embedded_now"].value == 0
    assert store.sagas.load_saga(f"promote-{pending['id']}")["status"] == "done"
