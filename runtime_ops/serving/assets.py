"""Serving: embed the corpus with the production model, build the retrieval index, answer questions."""

import hashlib
import time
from typing import Any

import dagster as dg

from runtime_ops.automation import follow_upstream
from runtime_ops.embedders.registry import load_embedder
from runtime_ops.labels import version_label
from runtime_ops.locks.base import Locker
from runtime_ops.markdown import close_fences, code_span, escape_text
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import AnswersSpec, PipelineSpec, RetentionSpec
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import IO_RETRY
from runtime_ops.store import StateStore
from runtime_ops.vectors.base import IndexName, VectorStore, VectorStoreError


def _production_version(store: StateStore) -> int:
    version = store.registry.alias("production")
    if version is None:
        raise dg.Failure("no production model yet: promote one first (production_model)")
    return int(version)


def pipeline_vectors(spec: PipelineSpec) -> VectorStore:
    """The pipeline's vector store (one per URL and process); a configuration error fails without retries."""
    from runtime_ops.vectors.factory import pipeline_vector_store

    try:
        return pipeline_vector_store(spec.vector_store)
    except VectorStoreError as exc:
        raise dg.Failure(f"pipeline {spec.name}: {exc}", allow_retries=False) from None


def embed_corpus(context: dg.AssetExecutionContext, store: StateStore, vectors: VectorStore) -> dg.MaterializeResult:
    from runtime_ops.policies.drift import BatchDrift
    from runtime_ops.serving.indexing import record_drift
    from runtime_ops.serving.vector_index import ensure_index

    version = _production_version(store)
    started = time.monotonic()
    embedder = load_embedder(store, version)
    drift = BatchDrift(getattr(embedder, "knows_term", None))
    state = ensure_index(
        store, vectors, version, log=context.log.info, run_id=context.run_id, observe=drift.observe, embedder=embedder
    )
    # A fill recorded the model's centroid itself; a sync's new chunks are the drift signal of this batch.
    signal = None if state.filled else record_drift(store, version, drift, first=False, run_id=context.run_id)
    meta: dict[str, Any] = {}
    if signal is not None:  # what the corpus sensor's retrain policy reads (drift_signals)
        meta["drift/chunks"] = dg.MetadataValue.int(signal.chunks)
        meta["drift/corpus_revision"] = dg.MetadataValue.int(signal.corpus_revision)
        if signal.embedding_shift is not None:
            meta["drift/embedding_shift"] = dg.MetadataValue.float(round(signal.embedding_shift, 6))
        if signal.oov_rate is not None:
            meta["drift/oov_rate"] = dg.MetadataValue.float(round(signal.oov_rate, 6))
    return dg.MaterializeResult(
        metadata={
            "model_version": dg.MetadataValue.int(version),
            "index_id": dg.MetadataValue.int(state.index_id),
            "filled": state.filled,
            "embedded_now": dg.MetadataValue.int(state.embedded),
            "upserted": dg.MetadataValue.int(state.upserted),
            "removed": dg.MetadataValue.int(state.removed),
            "change_seq": dg.MetadataValue.int(state.synced_seq),
            "chunks": dg.MetadataValue.int(state.n_chunks),
            "vector_store": vectors.describe(),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
            **meta,
        }
    )


def index_corpus(
    context: dg.AssetExecutionContext,
    store: StateStore,
    vectors: VectorStore,
    retention: RetentionSpec,
    locker: Locker,
) -> dg.MaterializeResult:
    from runtime_ops.policies.retention import RetentionPolicy
    from runtime_ops.serving.index_alias import move_retrieval_index
    from runtime_ops.serving.retention import collect
    from runtime_ops.serving.vector_index import ensure_index

    # Read without the lock: building the index takes minutes. The writer reads production again under the lock
    # and stands down if a promotion, rollback or compensation moved it meanwhile (the winner serves its own).
    version = _production_version(store)
    state = ensure_index(store, vectors, version, log=context.log.info, run_id=context.run_id)
    # Syncs append small fragments (LanceDB) or leave statistics stale (pgvector): fold them into the ANN structure
    # once per serving pass, off the path that makes new documents searchable.
    started = time.monotonic()
    assert store.pipeline is not None
    vectors.open(IndexName(store.pipeline, version), _index_dim(store, vectors, version)).optimize()
    optimize_s = time.monotonic() - started
    move = move_retrieval_index(
        store, locker, state.index_id, actor=f"run:{context.run_id}", run_id=context.run_id, log=context.log.info
    )
    # What old versions left behind (indexes, stored vectors), beyond production, its rollback target, the
    # candidate and the newest few: collected here, after each change of the serving index.
    policy = RetentionPolicy(keep_recent=retention.keep_recent, keep_previous=retention.keep_previous)
    report = collect(store, vectors, policy, log=context.log.info)
    # The materialization says what serves now: after a stand-down, what the winner put there (or nothing).
    served: dict[str, Any] = {"model_version": version, "n_chunks": state.n_chunks, "synced_seq": state.synced_seq}
    meta: dict[str, Any] = {}
    if move.stood_down:
        served = store.indexes.current_index() or {"model_version": move.production, "n_chunks": 0, "synced_seq": 0}
        meta = {"stood_down": move.message, "built_index_id": dg.MetadataValue.int(state.index_id)}
    return dg.MaterializeResult(
        metadata={
            "index_id": dg.MetadataValue.int(move.serving or 0),
            "previous_index_id": dg.MetadataValue.int(move.previous or 0),
            "model_version": dg.MetadataValue.int(served["model_version"] or 0),
            "chunks": dg.MetadataValue.int(served["n_chunks"] or 0),
            "change_seq": dg.MetadataValue.int(served["synced_seq"] or 0),
            "fence": dg.MetadataValue.int(move.fence),
            "vector_store": vectors.describe(),
            "optimize_s": dg.MetadataValue.float(round(optimize_s, 3)),
            **meta,
            "retention/kept": ", ".join(f"v{v} ({why})" for v, why in sorted(report.plan.reasons.items())),
            "retention/collected_versions": ", ".join(f"v{v}" for v in report.plan.collect) or "none",
            "retention/dropped_indexes": dg.MetadataValue.int(len(report.dropped_indexes)),
            "retention/dropped_vectors": dg.MetadataValue.int(report.dropped_vectors),
            "retention/released_bytes": dg.MetadataValue.int(report.released_bytes),
        },
        data_version=dg.DataVersion(
            f"{version_label(served['model_version'])}-i{move.serving or 0}-s{served['synced_seq']}"
        ),
    )


def _index_dim(store: StateStore, vectors: VectorStore, version: int) -> int:
    row = store.indexes.index_for(version, vectors.kind, vectors.describe())
    assert row is not None and row["dim"], f"model v{version} has no index in {vectors.describe()}"
    return int(row["dim"])


class AnswersConfig(dg.Config):
    questions: list[str] = []
    top_k: int = 4
    timeout_s: float = 20.0


# Questions rag_answers asks when the pipeline names no questions file: a few of its own evaluation questions.
SAMPLE_QUESTIONS = 5


def default_questions(store: StateStore, answers: AnswersSpec) -> list[str]:
    """The pipeline's `answers.questions_file`, else the first few gating questions of its current evaluation set
    (`golden_questions`): questions about the team's own corpus, never another pipeline's."""
    import json

    if answers.questions_file is not None:
        try:
            text = answers.questions_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise dg.Failure(
                f"answers.questions_file {answers.questions_file}: {exc}; fix the path in defs.yaml",
                allow_retries=False,
            ) from None
        return [q.strip() for q in text.splitlines() if q.strip()]
    artifact_id = store.registry.alias("question_set")
    if artifact_id is None:
        return []
    rows = [json.loads(line) for line in store.artifacts.get_artifact(artifact_id).decode("utf-8").splitlines() if line]
    return [str(r["question"]) for r in sorted(rows, key=lambda r: str(r["id"])) if r.get("gating")][:SAMPLE_QUESTIONS]


def answer_markdown(number: int, question: str, answer: str, sources: list[dict[str, Any]]) -> str:
    """One question's section of the `answers` metadata: the question as a heading, the answer as the markdown it
    is (code blocks stay code blocks), then the documents it came from, best first.

    A section per question rather than a table row: a table cell holds one line, so an answer's code block could
    only be flattened there."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for source in sources:
        by_key.setdefault(str(source["key"]), []).append(source)
    cited = []
    for key, hits in by_key.items():
        ids = [str(i) for h in hits for i in h.get("chunk_ids") or [h["chunk_id"]]]
        best = max(float(h["score"]) for h in hits)
        cited.append(f"- {code_span(key)} (chunk{'s' if len(ids) > 1 else ''} {', '.join(ids)}, score {best:.3f})")
    # An answer that leaves a code block open would swallow the next questions.
    body = close_fences(answer.strip()) if answer.strip() else "_No answer: nothing was retrieved._"
    return "\n\n".join([f"### {number}. {escape_text(question)}", body, "Sources:", "\n".join(cited) or "_none_"])


def answer_questions(
    context: dg.AssetExecutionContext,
    config: AnswersConfig,
    store: StateStore,
    vectors: VectorStore,
    answers: AnswersSpec,
) -> dg.MaterializeResult:
    import os

    from runtime_ops.serving.answerer import answer_with
    from runtime_ops.serving.passages import merge_passages
    from runtime_ops.serving.search import NoServingIndex, Searcher

    questions = config.questions or default_questions(store, answers)
    if not questions:
        raise dg.Failure(
            "no questions to answer: set answers.questions_file in the pipeline's defs.yaml, pass run config "
            "questions: [...], or materialize golden_questions first"
        )
    searcher = Searcher(store, vectors)
    try:
        result = searcher.search(questions, config.top_k)
    except NoServingIndex as exc:
        raise dg.Failure(f"{exc}: materialize retrieval_index first") from None
    embedder = searcher.embedder(result.model_version)
    llm = None
    if answers.endpoint:
        from runtime_ops.serving.endpoint import ChatEndpoint

        # The key is read from its variable now, never carried in config that Dagster stores.
        key = os.environ.get(answers.api_key_env) if answers.api_key_env else None
        llm = ChatEndpoint(answers.endpoint, api_key=key or None, model=answers.model, timeout_s=config.timeout_s)
    fallbacks: list[str] = []
    mode = "model" if llm is not None else "extractive"
    reused = 0
    pending_keys: list[tuple[str, dict[str, str]]] = []
    rows = []
    sections: list[str] = []
    for question, qvec, hits in zip(questions, result.query_vectors, result.hits, strict=True):
        # One answer per (index, question, answerer): a re-run or retry reuses it instead of asking again.
        key = f"answer:{result.index_id}:{hashlib.sha256(question.encode()).hexdigest()[:24]}:{mode}"
        claim = store.effects.claim_effect(key, "answer", context.run_id)
        # Overlapping chunks of a document are one passage, answered from and cited once.
        passages = merge_passages(hits)
        sources = [
            {
                "key": p.document_key,
                "chunk_id": p.chunk_ids[0],
                "chunk_ids": list(p.chunk_ids),
                "score": round(p.score, 4),
            }
            for p in passages
        ]
        if claim.action == "skip" and claim.result:
            answer, answerer = claim.result["answer"], claim.result["answerer"]
            reused += 1
        else:
            texts = [p.text for p in passages]
            answer, answerer, failure = answer_with(llm, question, qvec, texts, embedder.embed)
            if failure is not None:
                fallbacks.append(failure)
                context.log.warning(f"model endpoint failed, answering extractively: {failure}")
            rows.append(
                {
                    "question": question,
                    "answer": answer,
                    "sources": sources,
                    "index_id": result.index_id,
                    "answerer": answerer,
                    "run_id": context.run_id,
                }
            )
            if answerer == mode:
                pending_keys.append((key, {"answer": answer, "answerer": answerer}))
            else:  # a fallback answer is not the effect asked for: the next run asks the endpoint again
                store.effects.fail_effect(key, "model endpoint failed; answered extractively")
        sections.append(answer_markdown(len(sections) + 1, question, answer, sources))
    if llm is not None:
        llm.close()
    if rows:
        store.answers.record_answers(rows)
    for key, value in pending_keys:
        store.effects.finish_effect(key, value)
    return dg.MaterializeResult(
        metadata={
            "questions": dg.MetadataValue.int(len(questions)),
            "index_id": dg.MetadataValue.int(result.index_id),
            "model_version": dg.MetadataValue.int(result.model_version),
            "answerer": "model endpoint" if llm is not None else "extractive",
            "endpoint_fallbacks": dg.MetadataValue.int(len(fallbacks)),
            "reused_answers": dg.MetadataValue.int(reused),
            "answers": dg.MetadataValue.md("\n\n".join(sections)),
        }
    )


def build_serving_assets(
    spec: PipelineSpec, document_chunks: dg.AssetsDefinition, production_model: dg.AssetsDefinition
) -> list[dg.AssetsDefinition]:
    """Embeddings, index and answers of one pipeline; declarative automation keeps them following upstream."""
    follow = follow_upstream(document_chunks.key)

    @dg.asset(
        key=spec.asset_path("document_embeddings"),
        deps=[document_chunks, production_model],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "serving"},
        retry_policy=IO_RETRY,
        automation_condition=follow,
        description="The production model's vector index, kept in step with the corpus: the chunks of documents that "
        "became current are embedded (once per model version) and upserted, documents superseded or deleted are "
        "removed, by replaying the corpus change feed (cost grows with the changes, not the corpus). A model's "
        "first run fills its index from the whole corpus; a killed run resumes. Records the drift signals of the "
        "new chunks (embedding shift from the corpus centroid, OOV rate) for the retrain policy.",
    )
    @observed
    def document_embeddings(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return embed_corpus(context, state.store().scoped(spec.name), pipeline_vectors(spec))

    @dg.asset(
        key=spec.asset_path("retrieval_index"),
        deps=[document_embeddings],
        group_name=spec.name,
        kinds={"vectors"},
        tags={"domain": "serving"},
        retry_policy=IO_RETRY,
        automation_condition=follow,
        # Every run that can move the pipeline's aliases holds this pool (automation and UI runs carry no tags).
        pool=spec.lifecycle_pool,
        description="The index the pipeline serves (`/api/search`, `/api/answer`, rag_answers): the production "
        "model's vector index, complete and in step, behind the `retrieval_index` alias (a promotion swaps it "
        "to the new model's index, a rollback back; earlier indexes stay until retention collects them). The "
        "alias moves under the promotion lock, only while the index is still production's.",
    )
    @observed
    def retrieval_index(
        context: dg.AssetExecutionContext, state: StateStoreResource, locks: LocksResource
    ) -> dg.MaterializeResult:
        store = state.store().scoped(spec.name)
        return index_corpus(context, store, pipeline_vectors(spec), spec.retention, locks.locker())

    @dg.asset(
        key=spec.asset_path("rag_answers"),
        deps=[retrieval_index],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "serving"},
        retry_policy=IO_RETRY,
        automation_condition=follow,
        description="Answers to questions from the retrieval index: extractive (best sentences of the top chunks) "
        "when the pipeline has no answers.endpoint (RUNTIME_OPS_MODEL_ENDPOINT).",
    )
    @observed
    def rag_answers(
        context: dg.AssetExecutionContext, config: AnswersConfig, state: StateStoreResource
    ) -> dg.MaterializeResult:
        return answer_questions(context, config, state.store().scoped(spec.name), pipeline_vectors(spec), spec.answers)

    return [document_embeddings, retrieval_index, rag_answers]
