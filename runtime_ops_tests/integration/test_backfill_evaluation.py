"""The gate's evaluation reuses what a backfill embedded: evaluation_report scores the candidate from the vectors
shadow_embeddings stored and embeds only the chunks no partition has reached yet, with the same numbers as an
evaluation that embedded everything. In process, on the `make dev` defaults (SQLite, the embedded vector store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate


def _report(flow: Any) -> dict[str, Any]:
    result = flow.materialize(["evaluation_report"])
    assert result.success
    [materialization] = result.asset_materializations_for_node("demo__evaluation_report")
    return {name: value.value for name, value in materialization.metadata.items()}


def test_evaluation_reads_the_backfilled_vectors_and_embeds_only_the_rest(
    env: Any, dagster_instance: Any, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    env(landing=str(landing), **NEEDS_A_HUMAN)
    store, pending, flow = pending_candidate(landing, dagster_instance)
    version = pending["candidate_version"]
    assert store.embeddings.embedding_counts(version)["embedded"] == 0  # the evaluation stored nothing

    first = _report(flow)
    chunks = int(first["chunks"])
    assert first["candidate_vectors_stored"] == "0" and chunks == store.documents.current_chunk_count()

    for key in "012":
        assert flow.materialize(["shadow_embeddings"], partition_key=key).success
    partial = store.embeddings.embedding_counts(version)["embedded"]
    assert 0 < partial < chunks
    middle = _report(flow)
    assert middle["candidate_vectors_stored"] == str(partial)
    assert store.embeddings.embedding_counts(version)["embedded"] == partial  # the rest embedded, not stored

    for key in "34567":
        assert flow.materialize(["shadow_embeddings"], partition_key=key).success
    last = _report(flow)
    assert last["candidate_vectors_stored"] == str(chunks)
    for report in (middle, last):
        # The numbers the UI plots: both models' metrics, the delta and its interval.
        numbers = {name: value for name, value in first.items() if isinstance(value, float)}
        assert "recall@5" in numbers and {name: report[name] for name in numbers} == numbers
        assert report["verdict"] == first["verdict"]
