"""Pipeline scoping of the state store (several retrieval pipelines on one database), on PostgreSQL and SQLite:
isolation of batches, documents, models, aliases, requests and reports; the unscoped view; migration 0008 moving
existing rows to 'demo'; and the store package importing nothing from runtime_ops.observability."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import (
    DEFAULT_PIPELINE,
    ForeignTarget,
    NewObject,
    StateStore,
    UnscopedWrite,
    open_store,
)
from runtime_ops.store.engine import engine_for
from runtime_ops.store.migrate import current_revision, head_revision, upgrade
from runtime_ops_tests.support.fencing import set_fenced

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("postgres_url"))


def _candidate(store: StateStore, seed: str) -> tuple[dict[str, Any], dict[str, Any]]:
    data = f"model-{seed}".encode()
    digest = hashlib.sha256(data).hexdigest()
    artifact = store.artifacts.put_artifact("embedder", data, digest)
    model, _ = store.registry.register_model(
        digest=digest, artifact_id=artifact, params={}, n_documents=1, n_chunks=1, corpus_revision=1, run_id=None
    )
    report = store.evaluations.record_eval_report(
        candidate_version=model["version"],
        production_version=None,
        candidate_metrics={"ndcg@5": 0.6},
        production_metrics=None,
        verdict={"meets_policy": True, "auto_approve": False},
        markdown="|",
        report_digest=f"r-{seed}",
        candidate_digest=hashlib.sha256(f"cand-{seed}".encode()).hexdigest(),
        run_id=None,
    )
    return model, report


def _populate(store: StateStore, seed: str) -> dict[str, Any]:
    """One of everything in `store`'s pipeline. The same document keys and model bytes in every pipeline."""
    now = datetime.now(UTC)
    batch = store.ledger.record_batch("s3://shared/", [NewObject("docs/a.md", "v1", 10, now)])
    assert batch is not None and batch["pipeline"] == store.pipeline and batch["seq"] == 1
    model, report = _candidate(store, seed)
    set_fenced(store, "production", model["version"])
    request, created = store.requests.open_request(
        candidate_version=model["version"],
        candidate_digest=report["candidate_digest"],
        eval_report_id=report["id"],
        requested_by="test",
        policy=RequestPolicy(approvers=("U1",)),
    )
    assert created and request["pipeline"] == store.pipeline
    return {"batch": batch, "model": model, "report": report, "request": request}


def test_pipelines_are_isolated(db_url: str) -> None:
    alpha = open_store(db_url, get_settings(), pipeline="alpha")
    beta = alpha.scoped("beta")
    assert (alpha.pipeline, beta.pipeline) == ("alpha", "beta")
    a = _populate(alpha, "same")
    # The same key, version and model bytes are a new document / model version in the other pipeline.
    assert beta.ledger.known_versions(["docs/a.md"]) == set()
    b = _populate(beta, "same")
    assert a["model"]["version"] == b["model"]["version"] == 1  # versions count per pipeline

    for mine, theirs in ((alpha, b), (beta, a)):
        name = mine.pipeline
        assert [x["pipeline"] for x in mine.ledger.batches()] == [name]
        assert mine.ledger.get_batch(theirs["batch"]["id"]) is None
        assert [d["pipeline"] for d in mine.documents.batch_documents(theirs["batch"]["id"])] == []
        assert {d["pipeline"] for d in mine.documents.documents_by_status("pending")} == {name}
        assert mine.documents.document("docs/a.md", "v1")["pipeline"] == name
        assert mine.registry.get_model(theirs["model"]["version"])["pipeline"] == name  # its own v1
        assert [m["pipeline"] for m in mine.registry.models()] == [name]
        assert mine.registry.latest_model()["pipeline"] == name
        assert mine.evaluations.get_eval_report(theirs["report"]["id"]) is None
        assert mine.evaluations.latest_eval_report()["pipeline"] == name
        assert mine.requests.get_request(theirs["request"]["id"]) is None
        assert mine.requests.request_for_digest(theirs["request"]["candidate_digest"])["pipeline"] == name
        assert [r["pipeline"] for r in mine.requests.list_requests()] == [name]
        assert [h["pipeline"] for h in mine.registry.alias_history("production")] == [name]
    assert alpha.registry.alias("production") == a["model"]["version"]
    assert beta.registry.alias("production") == b["model"]["version"]
    # Opening beta's request superseded nothing of alpha's.
    assert alpha.requests.get_request(a["request"]["id"])["status"] == "pending"
    # A vote through beta does not reach alpha's request.
    vote = beta.votes.cast_vote(a["request"]["id"], actor="U1", approve=True, channel="cli")
    assert vote.outcome == "unknown_request"
    assert alpha.votes.cast_vote(a["request"]["id"], actor="U1", approve=True, channel="cli").outcome == "accepted"
    assert beta.requests.get_request(b["request"]["id"])["status"] == "pending"

    # beta cannot point its alias at a model only alpha has (nor its index alias at alpha's index).
    alpha_v2, _ = _candidate(alpha, "alpha-only")
    assert alpha_v2["version"] == 2
    with pytest.raises(ForeignTarget, match=r"pipeline 'beta'.*version 2: it belongs to pipeline 'alpha'"):
        set_fenced(beta, "production", 2)
    assert beta.registry.alias("production") == b["model"]["version"]
    index = alpha.indexes.create_index(
        model_version=a["model"]["version"], backend="lance", location="/v", dim=8, synced_seq=0, run_id=None
    )["id"]
    with pytest.raises(ForeignTarget):
        set_fenced(beta, "retrieval_index", index)
    assert beta.indexes.get_index(index) is None and alpha.indexes.get_index(index)["pipeline"] == "alpha"

    # Effects: the same key is a separate claim per pipeline.
    assert alpha.effects.claim_effect("notify:x", "notify", "o").action == "run"
    assert beta.effects.claim_effect("notify:x", "notify", "o").action == "run"

    # The unscoped view reads both, each row saying whose it is; it refuses owned writes.
    every = alpha.scoped(None)
    assert every.pipeline is None
    assert sorted(x["pipeline"] for x in every.ledger.batches()) == ["alpha", "beta"]
    assert sorted(m["pipeline"] for m in every.registry.models()) == ["alpha", "alpha", "beta"]
    assert sorted(r["pipeline"] for r in every.requests.list_requests()) == ["alpha", "beta"]
    assert {(x["pipeline"], x["target"]) for x in every.registry.aliases("production")} == {
        ("alpha", a["model"]["version"]),
        ("beta", b["model"]["version"]),
    }
    assert every.requests.get_request(a["request"]["id"])["pipeline"] == "alpha"
    assert every.ledger.known_versions(["docs/a.md"]) == {("docs/a.md", "v1")}
    with pytest.raises(UnscopedWrite, match="unscoped"):
        every.ledger.record_batch("s3://shared/", [NewObject("docs/b.md", "v1", 1, None)])
    with pytest.raises(UnscopedWrite):
        every.registry.set_alias("production", a["model"]["version"], actor="test")
    with pytest.raises(UnscopedWrite, match="look up a model version"):  # v1 of which pipeline?
        every.registry.get_model(1)
    assert open_store(db_url, get_settings(), pipeline=None).pipeline is None

    # Scrape-time aggregates carry the pipeline.
    aggregates = every.metrics.metric_aggregates(datetime.now(UTC), (1.0, 60.0))
    assert {p: x.approvals_pending for p, x in aggregates.items()} == {"alpha": 0, "beta": 1}
    assert set(beta.metrics.metric_aggregates(datetime.now(UTC), (1.0,))) == {"beta"}


def test_default_pipeline_is_demo(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings())
    assert store.pipeline == DEFAULT_PIPELINE == "demo"
    with pytest.raises(ValueError, match="pipeline name"):
        store.scoped("")


_ROWS_0007 = [
    "INSERT INTO artifacts (id, kind, digest, size, data, created_at) VALUES (1, 'embedder', 'd', 1, :blob, :t)",
    "INSERT INTO landing_batches (id, seq, source, created_at, n_objects, status) VALUES ('b1', 1, 's', :t, 1, 'ok')",
    "INSERT INTO documents (id, key, version, batch_id, size, status) VALUES (1, 'k', 'v', 'b1', 1, 'ok')",
    "INSERT INTO chunks (id, document_id, ord, text) VALUES (1, 1, 0, 'x')",
    "INSERT INTO model_versions (version, digest, artifact_id, params, n_documents, n_chunks, corpus_revision, "
    "trained_at) VALUES (1, 'm', 1, '{}', 1, 1, 1, :t)",
    "INSERT INTO eval_reports (id, candidate_version, candidate_metrics, verdict, markdown, report_digest, "
    "candidate_digest, created_at) VALUES (1, 1, '{}', '{}', '', 'r', 'c', :t)",
    "INSERT INTO approval_requests (id, candidate_version, candidate_digest, eval_report_id, kind, status, "
    "requested_by, created_at) VALUES ('apr-1', 1, 'c', 1, 'human', 'pending', 'x', :t)",
    "INSERT INTO approval_votes (request_id, actor, vote, channel, created_at) VALUES ('apr-1', 'U1', 'approve', "
    "'cli', :t)",
    "INSERT INTO aliases (name, target, fence, updated_at) VALUES ('production', 1, 3, :t)",
    "INSERT INTO alias_history (name, old_target, new_target, actor, changed_at) VALUES ('production', NULL, 1, "
    "'x', :t)",
    "INSERT INTO sagas (id, kind, status, steps, created_at, updated_at) VALUES ('s1', 'p', 'done', '[]', :t, :t)",
    "INSERT INTO retrieval_indexes (id, model_version, corpus_revision, n_chunks, artifact_id, created_at) "
    "VALUES (1, 1, 1, 1, 1, :t)",
    "INSERT INTO answers (question, answer, sources, index_id, answerer, created_at) VALUES ('q', 'a', '[]', 1, "
    "'x', :t)",
    "INSERT INTO alerts (fingerprint, starts_at, alertname, status, labels, annotations, received_at, updated_at) "
    "VALUES ('f', :t, 'A', 'firing', '{}', '{}', :t, :t)",
    "INSERT INTO effects (key, kind, status, attempts, started_at) VALUES ('e1', 'notify', 'finished', 1, :t)",
]
_OWNED = (
    "landing_batches",
    "documents",
    "model_versions",
    "eval_reports",
    "aliases",
    "alias_history",
    "approval_requests",
    "sagas",
    "retrieval_indexes",
    "answers",
    "alerts",
    "effects",
)


def test_migration_0008_moves_existing_rows_to_demo(db_url: str) -> None:
    engine = engine_for(db_url, get_settings())
    upgrade(engine, get_settings(), "0007")
    assert current_revision(engine) == "0007"
    with engine.begin() as conn:
        for sql in _ROWS_0007:
            conn.execute(text(sql), {"t": datetime(2026, 11, 30, tzinfo=UTC), "blob": b"x"})
        if engine.dialect.name == "postgresql":  # explicit ids above: move the serial sequences past them
            for table in ("artifacts", "documents", "chunks", "eval_reports", "retrieval_indexes"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 1)"))
    upgrade(engine, get_settings())
    assert current_revision(engine) == head_revision()
    with engine.begin() as conn:
        for table in _OWNED:
            assert conn.execute(text(f"SELECT pipeline FROM {table}")).scalars().all() == ["demo"], table
        assert conn.execute(text("SELECT count(*) FROM approval_votes")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM chunks")).scalar() == 1
    demo = StateStore(engine, get_settings())
    assert demo.registry.alias("production") == 1
    assert demo.requests.get_request("apr-1")["pipeline"] == "demo"
    assert demo.ledger.known_versions(["k"]) == {("k", "v")}
    assert demo.effects.effect("e1")["status"] == "finished"
    # Per-pipeline uniqueness after the upgrade: the same seq, key/version, digest and alias name elsewhere.
    other = demo.scoped("other")
    assert other.ledger.record_batch("s", [NewObject("k", "v", 1, None)])["seq"] == 1
    assert other.registry.alias("production") is None
    model, _ = other.registry.register_model(
        digest="m", artifact_id=1, params={}, n_documents=1, n_chunks=1, corpus_revision=1, run_id=None
    )
    assert model["version"] == 1  # versions count per pipeline (migration 0017)
    set_fenced(other, "production", 1, actor="t")
    assert demo.registry.alias("production") == 1


def test_store_imports_nothing_from_observability() -> None:
    code = (
        "import sys, runtime_ops.store, runtime_ops.store.store, runtime_ops.store.migrate\n"
        "import pkgutil, importlib\n"
        "for m in pkgutil.iter_modules(runtime_ops.store.__path__):\n"
        "    importlib.import_module('runtime_ops.store.' + m.name)\n"
        "print(sorted(n for n in sys.modules if n.startswith('runtime_ops.observability')))\n"
    )
    env = {"PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    for path in (ROOT / "runtime_ops" / "store").rglob("*.py"):  # not even a function-level import
        source = path.read_text()
        assert "from runtime_ops.observability" not in source and "import runtime_ops.observability" not in source, path
