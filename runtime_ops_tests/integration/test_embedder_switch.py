"""A pipeline whose embedder is an OpenAI-compatible endpoint (a local server of the tests), then switched to
lsa in its defs.yaml: the switch is a new candidate, evaluated on the same questions and gated like any
retrain (real PostgreSQL state store, Dagster instance and HTTP server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops.definitions import build_definitions
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.embeddings_server import EmbeddingsServer
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline, write_own_corpus

KEY = "sk-test-embeddings-NOT-REAL-91c3"
DIM = 16


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer(dim=DIM) as srv:
        yield srv


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_endpoint_embedder_serves_then_a_switch_to_lsa_is_gated(
    env, postgres_url, dagster_instance, tmp_path: Path, server: EmbeddingsServer
) -> None:
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    common = "  evaluation: {min_questions: 40}\n"
    openai = (
        "  embedder:\n    kind: openai\n    openai:\n"
        f"      endpoint: {server.base_url}\n      model_name: test-embed\n      dimensions: {DIM}\n"
        "      api_key: {env: ACME_EMBEDDINGS_KEY}\n      batch_size: 50\n"
    )
    declare_pipeline(pipelines, "acme", landing, common + openai)
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines), ACME_EMBEDDINGS_KEY=KEY)
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    write_own_corpus(landing, 80)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))

    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success, "the first model (the endpoint's) has nothing to beat"
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    v1 = store.registry.alias("production")
    assert v1 is not None
    model = store.registry.get_model(v1)
    assert model["params"]["kind"] == "openai" and model["params"]["dimensions"] == DIM
    assert model["params"]["api_key_env"] == "ACME_EMBEDDINGS_KEY" and KEY not in str(model["params"])
    trained = _meta(train, "embedding_model")
    assert trained["kind"] == "openai" and trained["dim"] == DIM
    report = _meta(train, "evaluation_report")
    assert int(report["usage/requests"]) >= 2 and int(report["usage/texts"]) >= 100, "usage is in the metadata"
    assert store.indexes.current_index()["model_version"] == v1
    # Every request carried the key; no batch exceeded the declared size.
    assert server.requests and all(
        {k.lower(): v for k, v in r.headers.items()}.get("authorization") == f"Bearer {KEY}" for r in server.requests
    )
    assert max(len(r.body["input"]) for r in server.requests) <= 50
    # The key never reached what Dagster stores and renders.
    for record in dagster_instance.get_run_records():
        logs = dagster_instance.all_logs(record.dagster_run.run_id)
        assert KEY not in str(record.dagster_run.run_config) and not any(KEY in str(e) for e in logs)

    # The team switches to lsa: a new candidate, gated against the endpoint model on the same questions.
    declare_pipeline(pipelines, "acme", landing, common)
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    # The corpus sensor sees the declared embedder differ from the newest model's and retrains once.
    [request] = flow.tick("corpus_sensor")
    assert request.tags["runtime_ops/retrain_trigger"] == "embedder"
    switch = flow.run("corpus_sensor", request)
    checks = {e.check_name: e for e in switch.get_asset_check_evaluations()}
    assert checks["meets_policy"].passed and checks["human_approval"].passed, checks["meets_policy"].description
    meta: dict[str, Any] = {k: v.value for k, v in checks["meets_policy"].metadata.items()}
    assert meta["ci_low"] >= 0.02, "hash vectors retrieve nothing; lsa is clearly better"
    v2 = store.registry.alias("production")
    assert v2 is not None and v2 != v1 and store.registry.get_model(v2)["params"]["kind"] == "lsa"
    assert store.indexes.current_index()["model_version"] == v2
    assert _meta(switch, "evaluation_report")["question_set"] == report["question_set"], "the same questions"
    assert flow.tick("corpus_sensor") == [], "the switch retrains once"


def test_a_sentence_transformers_pipeline_serves_offline(env, postgres_url, dagster_instance, tmp_path: Path) -> None:
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    declare_pipeline(
        pipelines,
        "acme",
        landing,
        "  evaluation: {min_questions: 20}\n  embedder:\n    kind: sentence_transformers\n"
        "    sentence_transformers: {model_name: all-MiniLM-L6-v2, batch_size: 32}\n",
    )
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines), HF_HUB_OFFLINE="1")
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    write_own_corpus(landing, 30)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    version = store.registry.alias("production")
    assert version is not None
    params = store.registry.get_model(version)["params"]
    assert params["kind"] == "sentence_transformers" and params["dimensions"] == 384
    assert len(params["weights_digest"]) == 64, "the version is bound to the weights' digest"
    assert _meta(train, "embedding_model")["dim"] == 384
    index = store.indexes.current_index()
    assert index["model_version"] == version and index["n_chunks"] == int(_meta(train, "evaluation_report")["chunks"])
    assert "acme/product-" in _meta(train, "rag_answers")["answers"]
