"""Production's live-quality CUSUM on GET /metrics, on PostgreSQL and SQLite: `runtime_ops_quality_cusum` per
(pipeline, production version), its threshold and its reference share, computed from the query log's judgements
since the promotion. Only production's `helpful` / `not_helpful` judgements on its current version count; a replica
started later shows the same numbers as one that scraped all along; a new production version starts at 0."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from sqlalchemy import insert

from bench._synth import make_production, seed_corpus
from runtime_ops.observability.collector import RuntimeOpsCollector, metrics_registry
from runtime_ops.observability.exposition import parse_metrics
from runtime_ops.online.quality_cusum import DEFAULT_DESIGN
from runtime_ops.online.query_records import QueryRecord, ShownItem
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support.fencing import set_fenced

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(params=["postgresql", "sqlite"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StateStore, int]]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else f"sqlite:///{tmp_path}/s.db"
    seed_corpus(url, 20)
    version = make_production(url, seed=2, embed=False)["production_version"]
    store = open_store(url, get_settings(), pipeline="demo", migrate=False)
    yield store, version
    store.engine.dispose()


class Traffic:
    """Requests and their judgements written straight to the query log, one a second from `start`."""

    def __init__(self, store: StateStore, start: datetime) -> None:
        self.store, self.at, self.n = store, start, 0
        self.rng = random.Random(5)

    def judge(self, seconds: int, share: float, *, version: int, arm: str = "production", signal: str = "") -> None:
        records, feedback = [], []
        for _ in range(seconds):
            self.n += 1
            rid = f"q_test{self.n:026d}"
            shown = (ShownItem(rank=1, chunk_id=1, document_id=1, document_key="a.md"),)
            records.append(QueryRecord(rid, "demo", "search", arm, self.at, 5, 1.0, version, None, items=shown))
            judged = signal or ("helpful" if self.rng.random() < share else "not_helpful")
            feedback.append({"request_id": rid, "chunk_id": 1, "signal": judged, "value": None, "key_id": "k",
                             "created_at": self.at + timedelta(seconds=2)})  # fmt: skip
            self.at += timedelta(seconds=1)
        self.store.query_log.record(records)
        with self.store.tx() as conn:
            conn.execute(insert(t.feedback), feedback)


def _quality(collector: RuntimeOpsCollector) -> dict[tuple[str, str], float]:
    """{(family, model_version or ""): value} of the quality families for pipeline demo."""
    samples: Samples = parse_metrics(generate_latest(metrics_registry(collector)).decode())
    out = {}
    for (name, labels), value in samples.items():
        d = dict(labels)
        if name.startswith("runtime_ops_quality_") and d.get("pipeline") == "demo":
            out[(name, d.get("model_version", ""))] = value
    assert collector.scrape_errors == {}
    return out


def test_the_cusum_follows_production_from_its_promotion_and_restarts_with_a_new_version(world) -> None:
    store, version = world
    promoted = store.registry.aliases("production")[0]["updated_at"]
    now = [promoted]
    collector = RuntimeOpsCollector(store.scoped(None), lambda: None, clock=lambda: now[0])
    traffic = Traffic(store, promoted + timedelta(seconds=1))
    v = str(version)

    assert _quality(collector) == {("runtime_ops_quality_cusum", v): 0.0,
                                   ("runtime_ops_quality_cusum_threshold", ""): DEFAULT_DESIGN.threshold}  # fmt: skip
    # 25 minutes of production judged helpful 3 times in 4, scraped every minute. Around it, what must not count:
    # a candidate arm's and another version's requests judged not helpful, and clicks.
    steady = dropped = {}
    for _ in range(25):
        traffic.judge(60, 0.75, version=version)
        traffic.judge(5, 0.0, version=version, arm="candidate")
        traffic.judge(5, 0.0, version=version + 100)
        traffic.judge(5, 0.0, version=version, signal="click")
        now[0] = traffic.at
        steady = _quality(collector)
    assert steady[("runtime_ops_quality_cusum", v)] < DEFAULT_DESIGN.threshold
    assert steady[("runtime_ops_quality_reference_helpful_ratio", v)] == pytest.approx(0.75, abs=0.05)

    # Then users find production's results helpful only 1 time in 2: within 5 minutes it is past the threshold.
    for _ in range(5):
        traffic.judge(60, 0.5, version=version)
        now[0] = traffic.at
        dropped = _quality(collector)
    assert dropped[("runtime_ops_quality_cusum", v)] >= DEFAULT_DESIGN.threshold

    # A replica started now reads the same from the store (the slots still settling included).
    later = RuntimeOpsCollector(store.scoped(None), lambda: None, clock=lambda: now[0])
    assert _quality(later) == pytest.approx(dropped)

    # A rollback to another version: its statistic starts from nothing, the old version's series are gone.
    model = store.registry.get_model(version)
    assert model is not None
    other, _ = store.registry.register_model(
        digest="previous", artifact_id=model["artifact_id"], params={}, n_documents=0, n_chunks=0,
        corpus_revision=0, run_id=None,
    )  # fmt: skip
    set_fenced(store, "production", int(other["version"]))
    assert _quality(collector) == {("runtime_ops_quality_cusum", str(other["version"])): 0.0,
                                   ("runtime_ops_quality_cusum_threshold", ""): DEFAULT_DESIGN.threshold}  # fmt: skip
