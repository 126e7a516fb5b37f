"""Retraining on policy, not on every landing batch (real PostgreSQL state store and Dagster instance): a small
batch is served with the production model and the corpus sensor skips naming the unmet conditions; growth past
20%, a drifting batch and a manual request each trigger one retrain, once."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops.demo import CORPUS_DIR
from runtime_ops.models.sensors import request_retrain
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.tags import RETRAIN_TRIGGER_TAG
from runtime_ops_tests.support.flow import Flow, land_files

pytestmark = pytest.mark.slow(seconds=99)  # alone on 2 cores (Dec 2026): started first, see conftest.py

# Words the demo corpus (Python's standard library documentation) does not use: a batch the model cannot place.
# Nouns the documentation corpus never uses: a function word or "note" would pull the batch's mean vector back
# towards the corpus (what in-vocabulary words remain decide an lsa embedding).
OFF_TOPIC = (
    "Mascarpone, espresso, ladyfingers, marsala, cocoa. Ossobuco, gremolata, saffron risotto, parmigiano. "
    "Brioche dough, egg yolk glaze. Tiramisu, panettone, cannoli, ricotta, pistachio, amaretti, limoncello. "
)


def evaluate(flow: Flow, short: str) -> dg.SensorExecutionData:
    """One evaluation of a sensor, as the daemon runs it (its interval plays no part)."""
    sensor = flow.repo.get_sensor_def(flow.name(short))
    with dg.build_sensor_context(
        instance=flow.instance,
        instance_ref=flow.instance.get_ref(),
        definitions=flow.defs,
        resources=flow.defs.resources,
    ) as ctx:
        return sensor.evaluate_tick(ctx)


def serving_full_corpus(env: Any, postgres_url: str, instance: Any, landing: Path) -> tuple[StateStore, Flow]:
    """The whole demo corpus landed twice (under its own keys and a mirror's: about 950 chunks, so that 100
    one-chunk documents grow it by less than 20%); model v1 trained on it (first model), promoted and serving."""
    env(database_url=postgres_url, landing=str(landing))
    flow = Flow(instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    assert flow.automate() == (set(), None)  # baseline
    land_files(sorted(p for p in CORPUS_DIR.rglob("*") if p.is_file()), landing)
    shutil.copytree(CORPUS_DIR, landing / "mirror")
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [first] = flow.tick("corpus_sensor")
    assert first.run_key == "retrain:first_model:rev1" and first.tags[RETRAIN_TRIGGER_TAG] == "first_model"
    assert flow.run("corpus_sensor", first).success
    assert store.registry.alias("production") == 1
    settle(flow)  # the regression evaluation the promotion triggers
    return store, flow


def land_notes(store: StateStore, landing: Path, folder: str, n: int, text: str | None = None) -> None:
    """`n` one-chunk documents: passages of the current corpus (or `text`)."""
    chunks = store.documents.current_chunks()
    step = max(1, len(chunks) // n)
    for i in range(n):
        body = text if text is not None else chunks[(i * step) % len(chunks)][2][:400]
        path = landing / folder / f"note{i:03}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{body}\n(note {folder} {i})\n")


def ingest_and_serve(flow: Flow, store: StateStore) -> dict[str, Any]:
    """Ingest what landed; declarative automation embeds and indexes it with the production model. Returns the
    drift signal of that batch."""
    runs = flow.tick_and_run("landing_sensor")
    assert runs and all(r.success for r in runs)
    requested, run = flow.automate()
    assert {"document_embeddings", "retrieval_index"} <= requested and run is not None and run.success
    index = store.indexes.current_index()
    assert index is not None
    revision = store.ledger.corpus_revision()
    assert (index["model_version"], index["corpus_revision"]) == (store.registry.alias("production"), revision)
    [signal] = [s for s in store.retraining.drift_signals() if s["corpus_revision"] == revision]
    [meta] = [
        m.metadata for m in run.asset_materializations_for_node("demo__document_embeddings")
    ]  # the signal is on the asset's metadata too
    assert meta["drift/chunks"].value == signal["chunks"]
    assert meta["drift/oov_rate"].value == round(signal["oov_rate"], 6)
    settle(flow)
    return signal


def settle(flow: Flow) -> None:
    """Automation ticks until nothing more is requested (the daemon ticks all along; a materialization and a
    new upstream batch seen in the same tick would count as handled)."""
    for _ in range(3):
        if flow.automate() == (set(), None):
            return
    raise AssertionError("declarative automation keeps requesting runs")


def test_small_batch_is_served_and_skipped_growth_retrains_once(env, postgres_url, dagster_instance, tmp_path) -> None:
    landing = tmp_path / "landing"
    store, flow = serving_full_corpus(env, postgres_url, dagster_instance, landing)
    v1 = store.registry.get_model(1)
    assert v1 is not None
    assert 100 / v1["n_chunks"] < 0.2, "the demo corpus is large enough that 100 one-chunk documents grow it < 20%"

    land_notes(store, landing, "batch1", 100)
    signal = ingest_and_serve(flow, store)
    assert signal["chunks"] == 100 and signal["model_version"] == 1
    assert 0 <= signal["embedding_shift"] < 0.25 and signal["oov_rate"] < 0.3
    tick = evaluate(flow, "corpus_sensor")
    assert not tick.run_requests
    grown = (store.documents.current_chunk_count() - v1["n_chunks"]) / v1["n_chunks"]
    assert tick.skip_message is not None
    assert tick.skip_message.startswith(f"corpus grew {grown * 100:.1f}% since model v1 (needs 20.0%); ")
    assert "embedding shift" in tick.skip_message and "(threshold 0.25)" in tick.skip_message
    assert "OOV" in tick.skip_message and "(threshold 30.0%)" in tick.skip_message
    assert store.registry.latest_model()["version"] == 1  # no retrain for that batch

    land_notes(store, landing, "batch2", 100)  # past 20% together with batch1
    ingest_and_serve(flow, store)
    revision = store.ledger.corpus_revision()
    [train] = flow.tick("corpus_sensor")
    assert train.run_key == f"retrain:growth:rev{revision}" and train.tags[RETRAIN_TRIGGER_TAG] == "growth"
    again = evaluate(flow, "corpus_sensor")  # the same state: the same run key, which the daemon launched already
    assert [r.run_key for r in again.run_requests or []] == [train.run_key]
    assert flow.tick("corpus_sensor") == []
    flow.run("corpus_sensor", train)  # the gate decides on promotion; the model is registered either way
    newest = store.registry.latest_model()
    assert newest["version"] == 2 and newest["corpus_revision"] == revision
    done = evaluate(flow, "corpus_sensor").skip_message
    assert done == f"the newest model v2 is trained on corpus revision {revision}"


def test_a_manual_request_then_a_drifting_batch_each_retrain_once(
    env, postgres_url, dagster_instance, tmp_path
) -> None:
    landing = tmp_path / "landing"
    store, flow = serving_full_corpus(env, postgres_url, dagster_instance, landing)

    # A person asks for a retrain (the corpus has not changed): one run, and the request is consumed.
    assert evaluate(flow, "corpus_sensor").skip_message == "the newest model v1 is trained on corpus revision 1"
    request_id = request_retrain(store.retraining, store.ledger, reason="chunking changed", requested_by="alice")
    [train] = flow.tick("corpus_sensor")
    assert train.run_key == f"retrain:manual:req{request_id}" and train.tags[RETRAIN_TRIGGER_TAG] == "manual"
    [row] = store.retraining.retrain_requests()
    assert (row["status"], row["run_key"], row["requested_by"]) == ("requested", train.run_key, "alice")
    flow.launched_keys.clear()  # even without the daemon's run-key dedupe: the request was consumed
    assert flow.tick("corpus_sensor") == []
    assert flow.run("corpus_sensor", train).success  # the same corpus: the same model bytes, still production
    assert evaluate(flow, "corpus_sensor").skip_message == "the newest model v1 is trained on corpus revision 1"
    settle(flow)  # the regression evaluation that run's production_model materialization triggers

    # A batch off the corpus's topics: its drift retrains once.
    land_notes(store, landing, "recipes", 60, text=OFF_TOPIC)  # at least retrain.min_signal_chunks (50)
    signal = ingest_and_serve(flow, store)
    assert signal["embedding_shift"] >= 0.25
    revision = store.ledger.corpus_revision()
    [train] = flow.tick("corpus_sensor")
    assert train.run_key == f"retrain:drift:rev{revision}" and train.tags[RETRAIN_TRIGGER_TAG] == "drift"
    assert flow.tick("corpus_sensor") == []  # once
    flow.run("corpus_sensor", train)
    assert store.registry.latest_model()["corpus_revision"] == revision
    settle(flow)
    # The retrained model saw the batch: its signal no longer counts, and the next on-topic batch is served
    # (a small one: its own shift is large by chance, below min_signal_chunks it does not count).
    land_notes(store, landing, "batch1", 10)
    assert ingest_and_serve(flow, store)["chunks"] == 10
    tick = evaluate(flow, "corpus_sensor")
    assert not tick.run_requests and tick.skip_message and "corpus grew" in tick.skip_message


def test_retrain_tables_match_their_migration(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from runtime_ops.store import schema as t

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings())
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "drift_signals" in repr(d) or "retrain_requests" in repr(d)] == []
