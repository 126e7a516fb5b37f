"""The whole lifecycle on a real PostgreSQL (state store and Dagster storage): land, ingest, train, gate,
approve through the CLI, promote, re-embed and re-index."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import dagster as dg
import pytest

from runtime_ops.demo import CORPUS_DIR
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow, land_files

pytestmark = pytest.mark.slow(seconds=40)  # alone on 2 cores (Dec 2026): started first, see conftest.py


@pytest.fixture
def corpus_halves() -> tuple[list[Path], list[Path]]:
    files = sorted(p for p in CORPUS_DIR.rglob("*") if p.is_file())
    return files[::2], files[1::2]


def test_approval_through_cli_promotes_and_reindexes(
    env, postgres_url, dagster_instance, tmp_path, corpus_halves, capsys
) -> None:
    landing = tmp_path / "landing"
    # A margin no candidate can beat and no regression limit: every candidate after the first needs a human.
    env(
        database_url=postgres_url,
        landing=str(landing),
        **NEEDS_A_HUMAN,
    )
    flow = Flow(dagster_instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    first, second = corpus_halves
    assert flow.automate() == (set(), None)  # the automation sensor's first tick only takes a baseline

    land_files(first, landing)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success, "the first model is auto-approved and promoted in the same run"
    assert store.registry.alias("production") == 1
    assert store.indexes.current_index()["model_version"] == 1
    assert store.requests.list_requests()[0]["kind"] == "policy"
    # The automation sensor ticks all along: the train run already materialized the serving assets, and the
    # promotion triggers a regression evaluation.
    assert flow.automate()[0] == {"production_evaluation"}

    land_files(second, landing)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train2] = flow.tick_and_run("corpus_sensor")
    # Waiting for a person is not a failure: the run succeeds, the gate reports pending as a warning, and the
    # promotion and the serving assets after it are not materialized in this run (and not failed either).
    assert train2.success
    assert not train2.get_step_failure_events()
    checks = {e.check_name: e for e in train2.get_asset_check_evaluations()}
    assert {n: c.passed for n, c in checks.items()} == {"meets_policy": True, "human_approval": False}
    gate = checks["human_approval"]
    assert gate.severity == dg.AssetCheckSeverity.WARN and (gate.description or "").startswith("Pending: ")
    assert gate.metadata["status"].value == "pending" and "approvals approve" in str(gate.metadata["decide"].value)
    materialized = {e.asset_key.path[-1] for e in train2.get_asset_materialization_events() if e.asset_key}
    assert materialized == {"embedding_model", "golden_questions", "evaluation_report"}
    assert store.registry.alias("candidate") == 2 and store.registry.alias("production") == 1
    [pending] = store.requests.list_requests(status="pending")
    assert pending["candidate_version"] == 2
    assert gate.metadata["approval_id"].value == pending["id"] and "expires_at" in gate.metadata
    # The report's metadata plots the evaluation history: both versions, production marked, v2 highlighted.
    [report] = [
        m.materialization
        for m in (e.step_materialization_data for e in train2.get_asset_materialization_events())
        if m.materialization.asset_key == dg.AssetKey(["demo", "evaluation_report"])
    ]
    history = cast(str, report.metadata["history"].value).splitlines()  # a markdown value
    assert history[0] == "| version | set | recall@5 | ndcg@10 | mrr | verdict |"
    assert history[2].startswith("| v1 (production) |") and history[3].startswith("| **v2** |")
    assert "█" in history[3] and "needs approval" in history[3]

    # Selecting production_model alone bypasses the check in Dagster; the asset itself must still refuse.
    bypass = flow.materialize(["production_model"])
    assert not bypass.success
    [refusal] = bypass.get_step_failure_events()
    error = refusal.step_failure_data.error
    assert error is not None and error.cls_name == "Failure" and not error.cause
    failure = error.message.strip()
    assert "refusing to promote" in failure and pending["id"] in failure and "\n" not in failure
    assert store.registry.alias("production") == 1
    assert [h["new_target"] for h in store.registry.alias_history("production")] == [1]

    # New documents still reach the index with the current production model while the approval waits: the
    # serving assets follow their upstream through declarative automation.
    requested, reindex = flow.automate()
    assert "document_embeddings" in requested and reindex is not None and reindex.success
    assert store.indexes.current_index()["model_version"] == 1
    assert store.indexes.current_index()["corpus_revision"] == store.ledger.corpus_revision()
    assert flow.automate() == (set(), None)  # handled: nothing more to do

    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice", "--reason", "looks fine"]) == 0
    assert "approved by alice" in capsys.readouterr().out
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "bob"]) == 1  # decided exactly once

    [promotion_request] = flow.tick("approvals_sensor")
    assert promotion_request.run_key == pending["id"]
    promotion = flow.run("approvals_sensor", promotion_request)
    assert promotion.success
    assert store.registry.alias("production") == 2
    history = store.registry.alias_history("production")
    assert [(h["new_target"], h["approval_id"], h["actor"]) for h in history][-1] == (2, pending["id"], "alice")
    index = store.indexes.current_index()
    assert index["model_version"] == 2 and index["corpus_revision"] == store.ledger.corpus_revision()
    counts = store.embeddings.embedding_counts(2)
    assert counts["embedded"] == counts["current_chunks"] == index["n_chunks"] > 0
    answers = store.answers.latest_answers(limit=1)
    assert answers and answers[0]["index_id"] == index["id"] and answers[0]["sources"]

    # The runless check result marks the decision in the UI; a later tick launches nothing more.
    latest = dagster_instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey(["demo", "evaluation_report"]), "human_approval")]
    )
    assert latest
    assert flow.tick("approvals_sensor") == []
    assert flow.tick("corpus_sensor") == []
    # The promotion already rebuilt the serving assets; what is left is the regression evaluation it triggers.
    assert flow.automate()[0] == {"production_evaluation"}


def test_rejection_keeps_production(env, postgres_url, dagster_instance, tmp_path, corpus_halves) -> None:
    landing = tmp_path / "landing"
    env(
        database_url=postgres_url,
        landing=str(landing),
        **NEEDS_A_HUMAN,
    )
    flow = Flow(dagster_instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    first, second = corpus_halves
    land_files(first, landing)
    flow.tick_and_run("landing_sensor")
    flow.tick_and_run("corpus_sensor")
    land_files(second[:10], landing)
    flow.tick_and_run("landing_sensor")
    flow.tick_and_run("corpus_sensor")
    [pending] = store.requests.list_requests(status="pending")
    assert operator_cli(["approvals", "reject", pending["id"], "--as", "carol", "--reason", "recall dropped"]) == 0
    assert flow.tick("approvals_sensor") == []
    refused = flow.materialize(["production_model"])
    assert not refused.success
    assert "rejected by carol" in refused.get_step_failure_events()[0].step_failure_data.error.message
    assert store.registry.alias("production") == 1
