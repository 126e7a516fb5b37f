"""Model versions count per pipeline (v1, v2, ... in each), on PostgreSQL and SQLite: a model is (pipeline,
version), so v1 of two pipelines never meet in embeddings, indexes, reports, requests, drift signals or aliases;
migration 0017 keeps the numbers rows had and the schema matches it."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import NewObject, StateStore, UnscopedWrite, open_store
from runtime_ops.store import schema as t
from runtime_ops.store.engine import engine_for
from runtime_ops.store.migrate import current_revision, head_revision, upgrade
from runtime_ops_tests.support.fencing import set_fenced

REFERRING = ("model_versions", "eval_reports", "approval_requests", "retrieval_indexes", "drift_signals")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("postgres_url"))


def _model(store: StateStore, seed: str) -> int:
    data = f"model-{seed}".encode()
    artifact = store.artifacts.put_artifact("embedder", data, hashlib.sha256(data).hexdigest())
    model, _ = store.registry.register_model(
        digest=hashlib.sha256(data).hexdigest(),
        artifact_id=artifact,
        params={},
        n_documents=1,
        n_chunks=1,
        corpus_revision=1,
        run_id=None,
    )
    return int(model["version"])


def _chunk(store: StateStore, key: str) -> int:
    batch = store.ledger.record_batch("test://", [NewObject(key, "v1", 5, None)])
    assert batch is not None
    [doc] = store.documents.batch_documents(batch["id"])
    store.documents.store_chunks(doc["id"], [f"text of {key}"])
    [(chunk_id, _, _)] = [c for c in store.documents.current_chunks() if c[1] == key]
    return int(chunk_id)


def _report(store: StateStore, version: int, seed: str) -> dict[str, Any]:
    return store.evaluations.record_eval_report(
        candidate_version=version,
        production_version=None,
        candidate_metrics={"ndcg@5": 0.5},
        production_metrics=None,
        verdict={"meets_policy": True, "auto_approve": False},
        markdown="|",
        report_digest=f"r-{seed}",
        candidate_digest=hashlib.sha256(seed.encode()).hexdigest(),
        run_id=None,
    )


def test_each_pipeline_counts_its_own_versions_and_v1_of_two_pipelines_never_meet(db_url: str) -> None:
    alpha = open_store(db_url, get_settings(), pipeline="alpha")
    beta = alpha.scoped("beta")
    assert [_model(alpha, "a1"), _model(alpha, "a2")] == [1, 2]
    assert _model(beta, "b1") == 1  # a second pipeline's first model is v1, not v3
    assert _model(beta, "a1") == 2  # the same bytes in another pipeline are that pipeline's next version
    assert _model(alpha, "a1") == 1 and _model(alpha, "a3") == 3  # the same digest is the same version
    assert [m["version"] for m in beta.registry.models()] == [1, 2]

    # v1 of alpha and v1 of beta, through every table that names a model version.
    chunks = {"alpha": _chunk(alpha, "a.md"), "beta": _chunk(beta, "b.md")}
    vectors = {"alpha": np.ones(4, dtype="<f4"), "beta": np.full(4, 2.0, dtype="<f4")}
    for store in (alpha, beta):
        name = str(store.pipeline)
        assert store.embeddings.put_embeddings(1, [(chunks[name], vectors[name])]) == 1
        store.indexes.create_index(model_version=1, backend="lance", location="/v", dim=4, synced_seq=0, run_id=None)
        report = _report(store, 1, name)
        store.requests.open_request(
            candidate_version=1,
            candidate_digest=report["candidate_digest"],
            eval_report_id=report["id"],
            requested_by="test",
            policy=RequestPolicy(approvers=("U1",)),
        )
        store.retraining.record_drift_signal(
            model_version=1,
            corpus_revision=1,
            chunks=1,
            embedding_shift=None,
            oov_rate=0.0,
            centroid_sum=vectors[name].astype("<f8").tobytes(),
            centroid_count=1,
            run_id=None,
        )
        set_fenced(store, "production", 1)
    for store in (alpha, beta):
        name = str(store.pipeline)
        assert store.registry.get_model(1)["digest"] == hashlib.sha256(f"model-{name[0]}1".encode()).hexdigest()
        assert store.embeddings.embedding_counts(1) == {"current_chunks": 1, "embedded": 1}
        [[(chunk_id, _, raw)]] = list(store.embeddings.iter_current_vectors(1))
        assert chunk_id == chunks[name] and np.frombuffer(raw, dtype="<f4").tolist() == vectors[name].tolist()
        assert store.embeddings.chunks_missing_embeddings(1, 10) == []
        assert store.indexes.index_for(1, "lance", "/v")["pipeline"] == name
        assert store.evaluations.latest_eval_report(candidate_version=1)["pipeline"] == name
        [request] = store.requests.list_requests(status="pending")
        assert (request["pipeline"], request["candidate_version"]) == (name, 1)
        centroid = store.retraining.latest_centroid(1)
        assert centroid is not None and np.frombuffer(centroid[0]).tolist() == vectors[name].tolist()
        assert store.registry.alias("production") == 1

    # The unscoped view keeps them apart: one history row per (pipeline, version), and no lookup by version alone.
    every = alpha.scoped(None)
    assert sorted((r["pipeline"], r["candidate_version"]) for r in every.evaluations.eval_history()) == [
        ("alpha", 1),
        ("beta", 1),
    ]
    with pytest.raises(UnscopedWrite, match="look up a model version"):
        every.embeddings.embedding_counts(1)
    # A row may only name a version of its own pipeline: alpha has v3, beta does not.
    with pytest.raises(IntegrityError):
        _report(beta, 3, "beta-v3")


_ROWS_0015 = [
    "INSERT INTO artifacts (id, kind, digest, size, data, created_at) VALUES (1, 'embedder', 'd', 1, :blob, :t)",
    "INSERT INTO landing_batches (id, pipeline, seq, source, created_at, n_objects, status) "
    "VALUES ('b1', 'demo', 1, 's', :t, 1, 'ingested'), ('b2', 'other', 1, 's', :t, 1, 'ingested')",
    "INSERT INTO documents (id, pipeline, key, version, batch_id, size, status) "
    "VALUES (1, 'demo', 'k', 'v', 'b1', 1, 'ok'), (2, 'other', 'k', 'v', 'b2', 1, 'ok')",
    "INSERT INTO chunks (id, document_id, ord, text) VALUES (1, 1, 0, 'x'), (2, 2, 0, 'y')",
    # Before 0017 versions were global: demo has v1 and v3, other has v2.
    "INSERT INTO model_versions (version, pipeline, digest, artifact_id, params, n_documents, n_chunks, "
    "corpus_revision, trained_at) VALUES (1, 'demo', 'm1', 1, '{}', 1, 1, 1, :t), "
    "(2, 'other', 'm2', 1, '{}', 1, 1, 1, :t), (3, 'demo', 'm3', 1, '{}', 1, 1, 1, :t)",
    "INSERT INTO eval_reports (id, pipeline, candidate_version, production_version, candidate_metrics, verdict, "
    "markdown, report_digest, candidate_digest, created_at) VALUES (1, 'demo', 3, 1, '{}', '{}', '', 'r', 'c3', :t), "
    "(2, 'other', 2, NULL, '{}', '{}', '', 'r', 'c2', :t)",
    "INSERT INTO approval_requests (id, pipeline, candidate_version, candidate_digest, eval_report_id, kind, "
    "status, requested_by, created_at) VALUES ('apr-1', 'demo', 3, 'c3', 1, 'human', 'pending', 'x', :t)",
    "INSERT INTO retrieval_indexes (id, pipeline, model_version, corpus_revision, n_chunks, created_at, backend, "
    "location, status) VALUES (1, 'demo', 1, 1, 1, :t, 'lance', '/v', 'ready'), "
    "(2, 'other', 2, 1, 1, :t, 'lance', '/v', 'ready')",
    "INSERT INTO chunk_embeddings (chunk_id, model_version, vector) VALUES (1, 1, :blob), (2, 2, :blob)",
    "INSERT INTO drift_signals (id, pipeline, model_version, corpus_revision, chunks, centroid_sum, centroid_count, "
    "created_at) VALUES (1, 'other', 2, 1, 1, :blob, 1, :t)",
    "INSERT INTO aliases (pipeline, name, target, fence, updated_at) VALUES ('demo', 'production', 1, 0, :t), "
    "('demo', 'candidate', 3, 0, :t), ('other', 'production', 2, 0, :t), ('demo', 'retrieval_index', 1, 0, :t)",
]


def test_migration_0017_keeps_the_numbers_and_counts_on_per_pipeline(db_url: str) -> None:
    engine = engine_for(db_url, get_settings())
    upgrade(engine, get_settings(), "0015")
    assert current_revision(engine) == "0015"
    with engine.begin() as conn:
        for sql in _ROWS_0015:
            conn.execute(text(sql), {"t": datetime(2026, 12, 4, tzinfo=UTC), "blob": b"\x00\x00\x80?"})
        if engine.dialect.name == "postgresql":  # explicit ids above: move the serial sequences past them
            for table in ("artifacts", "documents", "chunks", "eval_reports", "retrieval_indexes", "drift_signals"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 3)"))
    upgrade(engine, get_settings())
    assert current_revision(engine) == head_revision()

    demo = StateStore(engine, get_settings())
    other, new = demo.scoped("other"), demo.scoped("new")
    assert [m["version"] for m in demo.registry.models()] == [1, 3]
    assert [m["version"] for m in other.registry.models()] == [2]
    assert demo.requests.get_request("apr-1")["candidate_version"] == 3
    assert demo.evaluations.latest_eval_report(candidate_version=3)["production_version"] == 1
    assert demo.indexes.current_index()["model_version"] == 1
    assert other.embeddings.embedding_counts(2) == {"current_chunks": 1, "embedded": 1}
    assert other.retraining.latest_centroid(2) is not None
    # Each pipeline's next model follows its own newest; a pipeline new to the store starts at v1.
    assert (_model(demo, "d4"), _model(other, "o3"), _model(new, "n1")) == (4, 3, 1)
    assert _model(new, "n2") == 2

    # The migrated schema is the one the tables declare (keys included), on both databases.
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if any(f"'{name}'" in repr(d) for name in (*REFERRING, "chunk_embeddings"))] == []


def test_retention_keeps_weights_another_pipeline_serves_with(db_url: str, tmp_path: Path) -> None:
    """Artifacts are shared by content: alpha's v1 and beta's v1 are the same bytes. Collecting alpha's v1 must not
    release the weights beta's production model loads."""
    from runtime_ops.policies.retention import RetentionPolicy
    from runtime_ops.serving.retention import collect
    from runtime_ops.vectors.factory import open_vector_store

    alpha = open_store(db_url, get_settings(), pipeline="alpha")
    beta = alpha.scoped("beta")
    assert (_model(alpha, "shared"), _model(beta, "shared")) == (1, 1)
    assert (_model(alpha, "a2"), _model(alpha, "a3")) == (2, 3)
    for version in (2, 3):
        set_fenced(alpha, "production", version)
    set_fenced(beta, "production", 1)
    report = collect(alpha, open_vector_store(f"lance://{tmp_path / 'vectors'}"), RetentionPolicy(0, 1))
    assert report.plan.collect == (1,)  # neither production (v3) nor its rollback target (v2)
    artifact = int(beta.registry.get_model(1)["artifact_id"])
    assert artifact == int(alpha.registry.get_model(1)["artifact_id"])
    assert beta.artifacts.get_artifact(artifact) == b"model-shared"  # beta still loads its production weights
    assert report.released_bytes == 0
