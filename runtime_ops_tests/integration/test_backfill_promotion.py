"""A promotion waits for the backfill of the candidate's index: with one of shadow_embeddings' 8 partitions missing,
the approved candidate's promotion run (launched by the approvals sensor) and `runtime-ops promote` are refused
with the missing partition named, production stays; once the last partition is materialized the promotion swaps
in the index the backfill filled, with nothing left to embed. In process, on PostgreSQL and the embedded vector
store (the `make dev` defaults but the database)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops.cli import main as cli
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate


def _failure(result: dg.ExecuteInProcessResult) -> str:
    return "\n".join(
        e.step_failure_data.error.message
        for e in result.all_events
        if e.is_step_failure and e.step_failure_data.error is not None
    )


def test_promotion_is_refused_until_every_partition_of_the_backfill_is_done(
    env: Any, postgres_url: str, dagster_instance: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), **NEEDS_A_HUMAN)
    store, pending, flow = pending_candidate(landing, dagster_instance)
    assert pending["candidate_version"] == 2
    for key in "0123456":
        done = flow.materialize(["shadow_embeddings"], partition_key=key)
        assert done.success, _failure(done)
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0

    [refused] = flow.tick_and_run("approvals_sensor")
    assert not refused.success
    message = _failure(refused)
    assert (
        "refusing to promote v2 yet" in message and "7 filled, 1 to go (partitions 7 of shadow_embeddings)" in message
    )
    assert f"materialize production_model with approval {pending['id']}" in message
    capsys.readouterr()
    assert cli(["promote", "--approval", pending["id"]]) == 1
    assert "partitions 7 of shadow_embeddings" in capsys.readouterr().err
    assert store.registry.alias("production") == 1 and store.indexes.current_index()["model_version"] == 1

    last = flow.materialize(["shadow_embeddings"], partition_key="7")
    assert last.success
    [materialization] = last.asset_materializations_for_node("demo__shadow_embeddings")
    assert materialization.metadata["index_complete"].value is True
    backfilled = store.indexes.index_for(2, "lance", materialization.metadata["vector_store"].value)
    assert backfilled is not None and backfilled["status"] == "ready"

    embedded = store.embeddings.embedding_counts(2)
    assert embedded["embedded"] == embedded["current_chunks"]
    promoted = flow.materialize(["production_model"], tags={"runtime_ops/approval_id": pending["id"]})
    assert promoted.success, _failure(promoted)
    assert store.registry.alias("production") == 2
    assert store.indexes.current_index()["id"] == backfilled["id"]  # the backfill's index, not a new fill
    assert store.embeddings.embedding_counts(2) == embedded
