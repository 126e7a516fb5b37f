"""Retention on a team's own pipeline (PostgreSQL state store, the embedded LanceDB vector store): after each change
of the serving index, versions beyond the policy lose their vector index, stored vectors and weights; production
and its rollback target never do, and the rollback target is served again at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime_ops.definitions import build_definitions
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops.store.registry.artifacts import ArtifactCollected
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline, write_own_corpus

PIPELINE = "acme"


def _grow_and_promote(flow: Flow, store: Any, landing: Path, start: int, n: int, capsys: Any) -> int:
    """Land `n` more documents (past the 20% growth), train the candidate, approve it, run the promotion."""
    write_own_corpus(landing, n, start=start)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success, "the candidate waits for a person (NEEDS_A_HUMAN): a success, not a failure"
    [pending] = store.requests.list_requests(status="pending")
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0
    capsys.readouterr()
    [promotion] = flow.tick_and_run("approvals_sensor")
    assert promotion.success
    return int(pending["candidate_version"])


def test_retention_collects_old_versions_but_never_production_or_its_rollback_target(
    env: Any, postgres_url: str, dagster_instance: Any, tmp_path: Path, capsys: Any
) -> None:
    from runtime_ops.alerts.rollback import run_rollback
    from runtime_ops.components.loading import get_spec
    from runtime_ops.embedders.registry import load_embedder
    from runtime_ops.locks.factory import open_locker
    from runtime_ops.serving.vector_store import pipeline_vectors
    from runtime_ops.vectors.base import IndexName

    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    declare_pipeline(
        pipelines,
        PIPELINE,
        landing,
        "  evaluation: {min_questions: 40}\n  retention: {keep_previous: 1, keep_recent: 0}\n",
    )
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines), **NEEDS_A_HUMAN)
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline=PIPELINE)
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline=PIPELINE)
    vectors = pipeline_vectors(get_spec(PIPELINE))

    write_own_corpus(landing, 60)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [first] = flow.tick_and_run("corpus_sensor")
    assert first.success and store.registry.alias("production") == 1

    v2 = _grow_and_promote(flow, store, landing, 60, 20, capsys)
    # v1 is v2's rollback target: everything of it stays.
    assert [n.model_version for n in vectors.names(PIPELINE)] == [1, v2]
    assert store.embeddings.embedding_counts(1)["embedded"] > 0

    v3 = _grow_and_promote(flow, store, landing, 80, 30, capsys)
    assert store.registry.alias("production") == v3
    # v1 is neither production (v3) nor its rollback target (v2), and keep_recent is 0: collected.
    assert [n.model_version for n in vectors.names(PIPELINE)] == [v2, v3]
    assert store.embeddings.embedding_counts(1)["embedded"] == 0
    assert [r["status"] for r in store.indexes.list_indexes(include_dropped=True) if r["model_version"] == 1] == [
        "dropped"
    ]
    with pytest.raises(ArtifactCollected, match="released by the retention policy"):
        load_embedder(store.registry, store.artifacts, 1)
    load_embedder(store.registry, store.artifacts, v2)  # the rollback target keeps its weights
    for version in (v2, v3):
        assert store.embeddings.embedding_counts(version)["embedded"] > 0

    # The kept rollback target serves again at once: its index, only the newest documents embedded.
    chunks = store.documents.current_chunk_count()
    embedded_v2 = store.embeddings.embedding_counts(v2)["embedded"]
    v2_index = store.indexes.index_for(v2, vectors.kind, vectors.describe())
    assert v2_index is not None
    outcome = run_rollback(
        store,
        open_locker(get_settings()),
        vectors,
        alert_key="retention-test",
        alert_ref="test",
        from_version=v3,
        to_version=v2,
        approval_id=None,
        run_id=None,
    )
    assert outcome.status == "done"
    serving = store.indexes.current_index()
    assert serving is not None and serving["id"] == v2_index["id"] and serving["n_chunks"] == chunks
    newly = store.embeddings.embedding_counts(v2)["embedded"] - embedded_v2
    assert 0 <= newly < chunks - embedded_v2 + 1 and embedded_v2 > chunks // 2, (newly, embedded_v2, chunks)
    assert vectors.open(IndexName(PIPELINE, v2), serving["dim"]).count() == chunks
