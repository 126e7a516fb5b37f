"""Editing any field of a pipeline's embedder that makes other vectors (here lsa's `dim` or `seed`) and reloading is a
new candidate: the corpus sensor requests one retrain; a declaration that spells out what the model was made with
requests none (real PostgreSQL state store and Dagster instance, the model trained by a real run)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from runtime_ops.components.loading import get_spec
from runtime_ops.definitions import build_definitions
from runtime_ops.models.sensors import embedder_switch
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops.tags import RETRAIN_TRIGGER_TAG
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline, write_own_corpus

COMMON = "  evaluation: {min_questions: 20}\n"


def _serving_first_model(env, postgres_url: str, instance: dg.DagsterInstance, tmp_path: Path) -> Flow:
    """Pipeline `acme` with the default embedder (lsa, dim 128, seed 0), its first model trained and promoted."""
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    declare_pipeline(pipelines, "acme", landing, COMMON)
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    flow = Flow(instance, defs=build_definitions(load_settings()), pipeline="acme")
    write_own_corpus(landing, 30)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [first] = flow.tick_and_run("corpus_sensor")
    assert first.success
    return flow


def _redeclare(flow: Flow, tmp_path: Path, embedder: str) -> Flow:
    """The team edits the embedder section and the code location reloads (the same instance and store)."""
    declare_pipeline(tmp_path / "pipelines", "acme", tmp_path / "landing", COMMON + embedder)
    return Flow(flow.instance, defs=build_definitions(load_settings()), pipeline="acme")


def _skipped(flow: Flow) -> str:
    """The corpus sensor's reason for requesting nothing (it fails when it requests a run)."""
    sensor = flow.repo.get_sensor_def(flow.name("corpus_sensor"))
    with dg.build_sensor_context(
        instance=flow.instance, definitions=flow.defs, resources=flow.defs.resources
    ) as context:
        result = sensor.evaluate_tick(context)
    assert not result.run_requests, [r.tags for r in result.run_requests]
    return result.skip_message or ""


@pytest.mark.parametrize(
    ("embedder", "reason"),
    [
        ("  embedder: {kind: lsa, dim: 64}\n", "the lsa embedder's declaration changed: dim 128 -> 64"),
        ("  embedder: {kind: lsa, seed: 3}\n", "the lsa embedder's declaration changed: seed 0 -> 3"),
    ],
    ids=["dim", "seed"],
)
def test_a_changed_embedder_field_requests_one_retrain(
    env, postgres_url, dagster_instance, tmp_path: Path, embedder: str, reason: str
) -> None:
    flow = _redeclare(_serving_first_model(env, postgres_url, dagster_instance, tmp_path), tmp_path, embedder)
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    assert embedder_switch(get_spec("acme", load_settings()).embedder, store.registry.latest_model()) == reason
    [request] = flow.tick("corpus_sensor")
    assert request.tags[RETRAIN_TRIGGER_TAG] == "embedder"
    assert request.run_key is not None and request.run_key.startswith("retrain:embedder:")
    assert flow.run("corpus_sensor", request).success
    latest = store.registry.latest_model()
    assert latest is not None and latest["version"] == 2
    # The new version recorded what was declared: the sensor sees no change any more.
    assert _skipped(flow).startswith("the newest model v2 is trained on corpus revision")


def test_an_unchanged_declaration_requests_no_retrain(env, postgres_url, dagster_instance, tmp_path: Path) -> None:
    # The defaults spelled out: the same model.
    flow = _redeclare(
        _serving_first_model(env, postgres_url, dagster_instance, tmp_path),
        tmp_path,
        "  embedder: {kind: lsa, dim: 128, seed: 0, max_features: 50000, train_sample: 50000}\n",
    )
    assert _skipped(flow).startswith("the newest model v1 is trained on corpus revision")
