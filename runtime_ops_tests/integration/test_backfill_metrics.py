"""A re-embedding backfill's progress on GET /metrics, on PostgreSQL and SQLite: `runtime_ops_index_shards_planned`
and `..._filled` per (pipeline, model version) for the indexes still filling with a plan, read from an unscoped
store (every pipeline), and no series once the index is ready or dropped; the families are described even empty."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from bench._synth import make_production, seed_corpus
from runtime_ops.observability.collector import RuntimeOpsCollector, metrics_registry
from runtime_ops.observability.exposition import parse_metrics
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store.serving.indexes import Backfill

FAMILIES = ("runtime_ops_index_shards_planned", "runtime_ops_index_shards_filled")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(params=["postgresql", "sqlite"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StateStore, int]]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else f"sqlite:///{tmp_path}/s.db"
    seed_corpus(url, 60)
    version = make_production(url, seed=2, embed=False)["production_version"]
    store = open_store(url, get_settings(), pipeline="demo", migrate=False)
    yield store, version
    store.engine.dispose()


def _scrape(collector: RuntimeOpsCollector) -> tuple[str, Samples]:
    text = generate_latest(metrics_registry(collector)).decode()
    return text, parse_metrics(text)


def _backfill_series(samples: Samples) -> dict[tuple[str, str, str], float]:
    """{(family, pipeline, model_version): value} of the two backfill families."""
    out = {}
    for (name, labels), value in samples.items():
        if name in FAMILIES:
            d = dict(labels)
            assert set(d) == {"pipeline", "model_version"}
            out[(name, d["pipeline"], d["model_version"])] = value
    return out


def _index(store: StateStore, version: int, location: str) -> int:
    row = store.indexes.create_index(
        model_version=version, backend="lance", location=location, dim=8, synced_seq=0, run_id=None
    )
    return int(row["id"])


def test_backfill_progress_is_served_per_pipeline_and_version_until_the_index_is_ready(world) -> None:
    store, version = world
    # The API's store is unscoped: the collector reads every pipeline's indexes.
    collector = RuntimeOpsCollector(store.scoped(None), lambda: None)
    text, samples = _scrape(collector)
    assert _backfill_series(samples) == {}
    for family in FAMILIES:  # described even when no backfill runs
        assert f"# HELP {family} " in text and f"# TYPE {family} gauge" in text

    index_id = _index(store, version, "demo-v")
    assert store.indexes.plan_shards(index_id, 4).count == 4
    for shard in (0, 1, 3):
        store.indexes.mark_shard_filled(index_id, shard, chunks=10, centroid_sum=None, run_id=None)
    # Left out: an index filling without a plan (one process fills it) and a dropped one with a plan.
    _index(store, version, "unplanned")
    dropped = _index(store, version, "dropped")
    store.indexes.plan_shards(dropped, 2)
    store.indexes.mark_dropped(dropped)
    # Another pipeline's backfill, with a model version of its own.
    other = store.scoped("other")
    demo_model = store.registry.get_model(version)
    assert demo_model is not None
    model, _ = other.registry.register_model(
        digest="other-model",
        artifact_id=demo_model["artifact_id"],
        params={},
        n_documents=0,
        n_chunks=0,
        corpus_revision=0,
        run_id=None,
    )
    other_version = int(model["version"])
    other_index = _index(other, other_version, "other-v")
    other.indexes.plan_shards(other_index, 2)

    v, ov = str(version), str(other_version)
    assert _backfill_series(_scrape(collector)[1]) == {
        ("runtime_ops_index_shards_planned", "demo", v): 4,
        ("runtime_ops_index_shards_filled", "demo", v): 3,
        ("runtime_ops_index_shards_planned", "other", ov): 2,
        ("runtime_ops_index_shards_filled", "other", ov): 0,
    }
    # A scoped store reads its own pipeline's backfills only.
    assert store.indexes.backfills() == [Backfill("demo", version, 4, 3)]
    assert other.indexes.backfills() == [Backfill("other", other_version, 2, 0)]

    store.indexes.mark_shard_filled(index_id, 2, chunks=10, centroid_sum=None, run_id=None)
    assert _backfill_series(_scrape(collector)[1])[("runtime_ops_index_shards_filled", "demo", v)] == 4

    # The last shard finished the index: it is ready, and its series go away (the other pipeline's stay).
    store.indexes.mark_synced(index_id, synced_seq=0, n_chunks=40, corpus_revision=0, ready=True)
    assert _backfill_series(_scrape(collector)[1]) == {
        ("runtime_ops_index_shards_planned", "other", ov): 2,
        ("runtime_ops_index_shards_filled", "other", ov): 0,
    }
    # A dropped index's backfill is over too.
    other.indexes.mark_dropped(other_index)
    text, samples = _scrape(collector)
    assert _backfill_series(samples) == {}
    for family in FAMILIES:
        assert f"# TYPE {family} gauge" in text
    assert collector.scrape_errors == {}
