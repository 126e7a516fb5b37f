"""Real questions as evaluation data, through the real ops API on SQLite and PostgreSQL: requests logged by
`/api/search`, feedback sent to `/api/feedback`, then `golden_questions` and `evaluation_report` materialized; the
report shows a "production queries" set (its version, its count, both models' metrics in rows of their own and in
the history) beside the gating set, whose verdict it does not touch. A pipeline that keeps only hashes has no such
set, and a query that retention deleted leaves the next version."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from fastapi.testclient import TestClient

from runtime_ops.api.app import create_app
from runtime_ops.components.loading import get_spec
from runtime_ops.embedders.lsa import EmbedderParams, digest, train_embedder
from runtime_ops.models.production_queries import question_id
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store.registry.artifacts import ArtifactCollected
from runtime_ops.tags import CANDIDATE_ALIAS, PRODUCTION_QUERIES_ALIAS
from runtime_ops.vectors.factory import pipeline_vector_store
from runtime_ops_tests.support.approvals_support import FakeClock
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.serving_index import TOPICS, serve_new_model

# Both keep the production queries from 2 questions up and have a reviewed set (the served corpus is too small to
# generate questions from); only `texts` keeps the text to evaluate.
PIPELINES = {"texts": "  queries: {log: text}\n", "hashes": ""}
EVALUATION = "  evaluation: {golden_set: golden.jsonl, min_production_queries: 2}\n"


def _reviewed(folder: Path, seed: int) -> None:
    """A reviewed question per topic of `serve_new_model`'s documents (`notes/<seed>-<i>.md`, topic i mod 4)."""
    lines = []
    for t, topic in enumerate(TOPICS):
        keys = [f"notes/{seed}-{i}.md" for i in range(len(TOPICS) * 3) if i % len(TOPICS) == t]
        lines.append(json.dumps({"id": f"reviewed-{t}", "question": f"how does {topic} work", "relevant": keys}))
    (folder / "golden.jsonl").write_text("\n".join(lines) + "\n")


@dataclass
class Traffic:
    store: StateStore  # unscoped
    clock: FakeClock
    search: dict[str, str]
    flow: Flow


@pytest.fixture(params=["sqlite", "postgresql"])
def traffic(request: pytest.FixtureRequest, env: Any, tmp_path: Path) -> Iterator[Traffic]:
    pipelines = tmp_path / "pipelines"
    for seed, (name, extra) in enumerate(PIPELINES.items(), 1):
        _reviewed(declare_pipeline(pipelines, name, tmp_path / "landing" / name, extra + EVALUATION).parent, seed)
    database = {"database_url": request.getfixturevalue("postgres_url")} if request.param == "postgresql" else {}
    env(RUNTIME_OPS_PIPELINES_DIR=str(pipelines), RUNTIME_OPS_QUERY_LOG_FLUSH_S="30", **NEEDS_A_HUMAN, **database)
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline=None)
    for seed, name in enumerate(PIPELINES, 1):
        serve_new_model(store.scoped(name), pipeline_vector_store(get_spec(name).vector_store), seed)
        _candidate(store.scoped(name), seed)
    search = {"Authorization": f"Bearer {store.api_keys.create('app', ['search']).key}"}
    with dg.DagsterInstance.ephemeral() as instance:
        yield Traffic(store, FakeClock(), search, Flow(instance))
    store.engine.dispose()


def _candidate(store: StateStore, seed: int) -> int:
    """A second lsa model of the served chunks (another dimension), registered as the pipeline's candidate."""
    params = EmbedderParams(dim=6, seed=seed + 10)
    data = train_embedder([t for _, _, t in store.documents.current_chunks()], params).to_bytes()
    model, _ = store.registry.register_model(
        digest=digest(data),
        artifact_id=store.artifacts.put_artifact("embedder", data, digest(data)),
        params={"kind": "lsa", **params.to_dict()},
        n_documents=12,
        n_chunks=12,
        corpus_revision=store.ledger.corpus_revision(),
        run_id=None,
    )
    store.registry.set_alias(CANDIDATE_ALIAS, int(model["version"]), actor="test")
    return int(model["version"])


def _ask(traffic: Traffic, pipeline: str, asked: list[tuple[str, str | None, str | None]]) -> dict[str, Any]:
    """Each (query, signal on the first result, signal on the second) asked of `pipeline` and its feedback sent;
    the document keys each signal named, by query."""
    with TestClient(create_app(get_settings(), clock=traffic.clock.now)) as client:
        found = []
        for query, *_ in asked:
            reply = client.post("/api/search", json={"query": query, "k": 3, "pipeline": pipeline},
                                headers=traffic.search)  # fmt: skip
            assert reply.status_code == 200, reply.text
            found.append(reply.json())
    traffic.clock.advance(seconds=5)  # the app's shutdown wrote the records; feedback may follow
    named: dict[str, Any] = {}
    with TestClient(create_app(get_settings(), clock=traffic.clock.now)) as client:
        for (query, *signals), reply in zip(asked, found, strict=True):
            for result, signal in zip(reply["results"], signals, strict=False):
                if signal is None:
                    continue
                body = {"request_id": reply["request_id"], "chunk_id": result["chunk_id"], "signal": signal}
                sent = client.post("/api/feedback", json=body, headers=traffic.search)
                assert sent.status_code == 201, sent.text
                named.setdefault(query, []).append((signal, result["document_key"]))
    return named


def _metadata(result: dg.ExecuteInProcessResult, pipeline: str, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey([pipeline, asset])]
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


def _evaluate(traffic: Traffic, pipeline: str) -> dg.ExecuteInProcessResult:
    traffic.flow.pipeline = pipeline
    run = traffic.flow.materialize(["golden_questions", "evaluation_report"])
    assert run.success
    return run


def test_positive_feedback_becomes_a_set_reported_beside_the_others(traffic: Traffic) -> None:
    store = traffic.store.scoped("texts")
    early = _ask(
        traffic,
        "texts",
        [
            ("How does the Quokka tracker export work?", "click", "helpful"),
            ("json pretty printing", "helpful", None),
            ("CSV dialect sniffing", "click", None),
        ],
    )
    traffic.clock.advance(hours=1)
    late = _ask(
        traffic,
        "texts",
        [
            ("csv   dialect sniffing", None, "helpful"),  # the same query as above, spelled otherwise
            ("sqlite cursor commits", "click", None),
            ("sqlite cursor commits", "not_helpful", None),  # another request: this one takes its own item away
        ],
    )
    run = _evaluate(traffic, "texts")
    golden = _metadata(run, "texts", "golden_questions")
    report = store.evaluations.latest_eval_report()
    assert report is not None and report["candidate_version"] == 2 and report["production_version"] == 1
    beside = report["verdict"]["production_queries"]
    version = beside["version"]
    assert store.registry.alias(PRODUCTION_QUERIES_ALIAS) is not None
    assert golden["production_queries"] == f"{version[:12]} (4 q)"

    # The set: one question per normalised query, the documents of its clicked/helpful items as relevant.
    from runtime_ops.models.question_set import current_production_queries

    held = current_production_queries(store)
    assert held is not None and held.version == version
    relevant = {q.question.question: set(q.question.relevant) for q in held.questions}
    expected = {
        "how does the quokka tracker export work?": {k for _, k in early["How does the Quokka tracker export work?"]},
        "json pretty printing": {k for _, k in early["json pretty printing"]},
        "csv dialect sniffing": {k for _, k in early["CSV dialect sniffing"] + late["csv   dialect sniffing"]},
        "sqlite cursor commits": {k for s, k in late["sqlite cursor commits"] if s == "click"},
    }
    assert relevant == expected
    assert {q.question.id for q in held.questions} == {question_id(text) for text in expected}
    assert not any(q.gating for q in held.questions)

    # Scored and reported apart: a count and both models' metrics; the gating set and its verdict as without it.
    assert beside["questions"] == 4
    assert set(beside["candidate_metrics"]) >= {"ndcg@10", "mrr", "recall@5", "questions"}
    assert beside["production_metrics"]["questions"] == 4.0
    assert report["verdict"]["provenance"] == {"reviewed": 4} and report["verdict"]["question_set"] != version
    assert report["verdict"]["reason"].startswith(("better", "worse", "no detectable"))  # judged on reviewed ones
    # The questions whose results changed most are the people's: reviewed ones and these queries, each labelled.
    changed = report["verdict"]["changed_questions"]
    assert {c["source"] for c in changed} == {"reviewed", "production_query"}, changed
    assert {c["question"] for c in changed if c["source"] == "production_query"} <= set(expected), changed
    markdown = report["markdown"]
    assert (
        "| production queries: ndcg@10 |" in markdown and "| production queries: questions | 4 | 4 | +0 |" in markdown
    )
    assert f"Production queries `{version[:12]} (4 q)`" in markdown
    meta = _metadata(run, "texts", "evaluation_report")
    assert meta["production_queries"] == f"{version[:12]} (4 q)"
    assert meta["production_queries/ndcg@10"] == pytest.approx(beside["candidate_metrics"]["ndcg@10"], abs=1e-4)
    history = meta["history"]
    assert "On the production queries (reported, not gating)" in history
    assert f"`{version[:12]} (4 q)`" in history.split("On the production queries")[1]

    # Retention deletes the first hour's requests: the next version leaves their queries out.
    assert store.query_log.delete_before(traffic.clock.now() - timedelta(minutes=30)) == 3
    _evaluate(traffic, "texts")
    after = current_production_queries(store)
    assert after is not None and after.version != version
    # The replaced version's text is released with it; its digest stays on record for the reports that name it.
    assert held.artifact_id is not None and store.artifacts.artifact_digest(held.artifact_id) == version
    with pytest.raises(ArtifactCollected):
        store.artifacts.get_artifact(held.artifact_id)
    assert {q.question.question for q in after.questions} == {"csv dialect sniffing", "sqlite cursor commits"}
    assert [q.question.relevant for q in after.questions if q.question.question == "csv dialect sniffing"] == [
        tuple(sorted({k for _, k in late["csv   dialect sniffing"]}))
    ]
    # Then below its minimum of 2: not used, and not scored from the older version either.
    store.query_log.delete_before(traffic.clock.now() + timedelta(minutes=1))
    run = _evaluate(traffic, "texts")
    assert store.registry.alias(PRODUCTION_QUERIES_ALIAS) is None
    assert after.artifact_id is not None
    with pytest.raises(ArtifactCollected):
        store.artifacts.get_artifact(after.artifact_id)
    assert _metadata(run, "texts", "golden_questions")["production_queries"] == "none"
    last = store.evaluations.latest_eval_report()
    assert last is not None and last["verdict"]["production_queries"] is None
    assert "| production queries:" not in last["markdown"]


def test_a_pipeline_that_keeps_only_hashes_has_no_production_queries(traffic: Traffic) -> None:
    _ask(traffic, "hashes", [("json pretty printing", "helpful", "click"), ("csv dialect sniffing", "click", None)])
    run = _evaluate(traffic, "hashes")
    golden = _metadata(run, "hashes", "golden_questions")
    assert golden["production_queries"] == "none"
    assert "queries.log is 'hash': no query text is kept to evaluate" in golden["notes"]
    store = traffic.store.scoped("hashes")
    assert store.registry.alias(PRODUCTION_QUERIES_ALIAS) is None
    report = store.evaluations.latest_eval_report()
    assert report is not None and report["verdict"]["production_queries"] is None
