"""A team's own corpus, with no golden set of its own, goes from landing to a promoted, indexed, answering
model, gated on questions generated from that corpus (real PostgreSQL state store and Dagster instance)."""

from __future__ import annotations

from pathlib import Path

from runtime_ops.definitions import build_definitions
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline, write_own_corpus


def _metadata(result, asset: str) -> dict:  # type: ignore[no-untyped-def]
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_own_corpus_without_golden_set_is_promoted_indexed_and_answers(
    env, postgres_url, dagster_instance, tmp_path: Path
) -> None:
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    declare_pipeline(pipelines, "acme", landing, "  evaluation: {min_questions: 60}\n")
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    write_own_corpus(landing, 150)

    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success, "the first model of a corpus with no golden set is gated on generated questions"

    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    assert store.registry.alias("production") == store.registry.alias("candidate") is not None
    questions = _metadata(train, "golden_questions")
    assert questions["gating_questions"] >= 60
    assert "provenance/reviewed" not in questions, "the default golden set names none of these documents"
    assert questions.get("provenance/inverse_cloze", 0) + questions.get("provenance/heading", 0) >= 60

    report = _metadata(train, "evaluation_report")
    assert report["question_set_version"] == questions["version"]
    assert report["question_set"] == f"{questions['version'][:12]} ({report['questions']} q)"
    assert int(report["questions"]) >= 60
    assert report["recall@5"] > 0.6, "generated questions are answerable: the model really retrieves"
    stored = store.evaluations.latest_eval_report()
    assert stored["verdict"]["question_set"] == questions["version"]
    assert set(stored["verdict"]["provenance"]) <= {"inverse_cloze", "heading"}
    assert f"Question set `{questions['version'][:12]}`" in stored["markdown"]

    index = store.indexes.current_index()
    assert index is not None and index["model_version"] == store.registry.alias("production")
    answers = _metadata(train, "rag_answers")
    assert answers["questions"] > 0 and answers["index_id"] == index["id"]
    assert "acme/product-" in answers["answers"], "answers cite the team's own documents"
