"""Serving: embed the corpus with the production model, build the retrieval index, answer questions."""

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from runtime_ops.automation import follow_upstream
from runtime_ops.embedders.registry import load_embedder
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import AnswersSpec, PipelineSpec
from runtime_ops.resources.state import StateStoreResource
from runtime_ops.retries import IO_RETRY
from runtime_ops.store import StateStore

if TYPE_CHECKING:  # numpy loads when an asset runs, not when the code location loads (bench/load.py)
    import numpy as np


def _production_version(store: StateStore) -> int:
    version = store.registry.alias("production")
    if version is None:
        raise dg.Failure("no production model yet: promote one first (production_model)")
    return int(version)


def embed_corpus(context: dg.AssetExecutionContext, store: StateStore) -> dg.MaterializeResult:
    from runtime_ops.serving.indexing import embed_missing_with_drift

    version = _production_version(store)
    started = time.monotonic()
    written, signal = embed_missing_with_drift(store, version, context.log.info, run_id=context.run_id)
    after = store.embeddings.embedding_counts(version)
    drift: dict[str, Any] = {}
    if signal is not None:  # what the corpus sensor's retrain policy reads (drift_signals)
        drift["drift/chunks"] = dg.MetadataValue.int(signal.chunks)
        drift["drift/corpus_revision"] = dg.MetadataValue.int(signal.corpus_revision)
        if signal.embedding_shift is not None:
            drift["drift/embedding_shift"] = dg.MetadataValue.float(round(signal.embedding_shift, 6))
        if signal.oov_rate is not None:
            drift["drift/oov_rate"] = dg.MetadataValue.float(round(signal.oov_rate, 6))
    return dg.MaterializeResult(
        metadata={
            "model_version": dg.MetadataValue.int(version),
            "embedded_now": dg.MetadataValue.int(written),
            "chunks": dg.MetadataValue.int(after["current_chunks"]),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
            **drift,
        }
    )


def index_corpus(context: dg.AssetExecutionContext, store: StateStore) -> dg.MaterializeResult:
    from runtime_ops.serving.indexing import build_index

    version = _production_version(store)
    try:
        built = build_index(store, version, context.run_id)
    except RuntimeError as exc:
        raise dg.Failure(str(exc)) from None
    previous = store.registry.alias("retrieval_index")
    if previous != built.index_id:
        store.registry.set_alias(
            "retrieval_index", built.index_id, actor=f"run:{context.run_id}", run_id=context.run_id
        )
    return dg.MaterializeResult(
        metadata={
            "index_id": dg.MetadataValue.int(built.index_id),
            "previous_index_id": dg.MetadataValue.int(previous or 0),
            "reused": built.reused,
            "model_version": dg.MetadataValue.int(version),
            "corpus_revision": dg.MetadataValue.int(built.corpus_revision),
            "chunks": dg.MetadataValue.int(built.n_chunks),
            "digest": built.digest,
            "size_bytes": dg.MetadataValue.int(built.size),
        },
        data_version=dg.DataVersion(built.digest[:16]),
    )


class AnswersConfig(dg.Config):
    questions: list[str] = []
    top_k: int = 4
    timeout_s: float = 20.0


def default_questions(answers: AnswersSpec) -> list[str]:
    path = answers.questions_file or Path(__file__).parent.parent / "demo" / "questions.txt"
    return [q.strip() for q in path.read_text().splitlines() if q.strip()] if path.exists() else []


def answer_questions(
    context: dg.AssetExecutionContext, config: AnswersConfig, store: StateStore, answers: AnswersSpec
) -> dg.MaterializeResult:
    import os

    from runtime_ops.serving.index import RetrievalIndex

    meta = store.indexes.current_index()
    if meta is None:
        raise dg.Failure("no retrieval index yet: materialize retrieval_index first")
    index = RetrievalIndex.from_bytes(store.artifacts.get_artifact(meta["artifact_id"]))
    embedder = load_embedder(store, meta["model_version"])
    questions = config.questions or default_questions(answers)
    if not questions:
        raise dg.Failure("no questions: pass run config questions: [...] or ship demo/questions.txt")
    qvecs = embedder.embed(questions)
    hits = index.search(qvecs, config.top_k)
    texts = store.documents.chunk_texts([cid for row in hits for cid, _ in row])
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
    lines = ["| question | answer | sources |", "|---|---|---|"]
    for question, qvec, row in zip(questions, qvecs, hits, strict=True):
        passages = [texts[cid][2] for cid, _ in row if cid in texts]
        sources = [
            {"key": texts[cid][0], "chunk_id": cid, "score": round(score, 4)} for cid, score in row if cid in texts
        ]
        # One answer per (index, question, answerer): a re-run or retry reuses it instead of asking again.
        key = f"answer:{meta['id']}:{hashlib.sha256(question.encode()).hexdigest()[:24]}:{mode}"
        claim = store.effects.claim_effect(key, "answer", context.run_id)
        if claim.action == "skip" and claim.result:
            answer, answerer = claim.result["answer"], claim.result["answerer"]
            reused += 1
        else:
            answer, answerer = _answer(llm, question, qvec, passages, embedder, fallbacks, context)
            rows.append(
                {
                    "question": question,
                    "answer": answer,
                    "sources": sources,
                    "index_id": meta["id"],
                    "answerer": answerer,
                    "run_id": context.run_id,
                }
            )
            if answerer == mode:
                pending_keys.append((key, {"answer": answer, "answerer": answerer}))
            else:  # a fallback answer is not the effect asked for: the next run asks the endpoint again
                store.effects.fail_effect(key, "model endpoint failed; answered extractively")
        cited = ", ".join(sorted({s["key"] for s in sources}))
        lines.append(f"| {question} | {answer.replace('|', '/').replace(chr(10), ' ')} | {cited} |")
    if llm is not None:
        llm.close()
    if rows:
        store.answers.record_answers(rows)
    for key, result in pending_keys:
        store.effects.finish_effect(key, result)
    return dg.MaterializeResult(
        metadata={
            "questions": dg.MetadataValue.int(len(questions)),
            "index_id": dg.MetadataValue.int(meta["id"]),
            "model_version": dg.MetadataValue.int(meta["model_version"]),
            "answerer": "model endpoint" if llm is not None else "extractive",
            "endpoint_fallbacks": dg.MetadataValue.int(len(fallbacks)),
            "reused_answers": dg.MetadataValue.int(reused),
            "answers": dg.MetadataValue.md("\n".join(lines)),
        }
    )


def _answer(
    llm: Any,
    question: str,
    qvec: "np.ndarray",
    passages: list[str],
    embedder: Any,
    fallbacks: list[str],
    context: dg.AssetExecutionContext,
) -> tuple[str, str]:
    """The model endpoint's answer, or the extractive one when there is no endpoint or it failed after its
    retries (answers stay available; the failure is logged and counted in the metadata)."""
    from runtime_ops.http import EndpointError
    from runtime_ops.serving.answerer import extractive_answer

    if llm is not None and passages:
        try:
            return llm.answer(question, passages), "model"
        except EndpointError as exc:
            fallbacks.append(str(exc))
            context.log.warning(f"model endpoint failed, answering extractively: {exc}")
    return extractive_answer(qvec, passages, embedder.embed), "extractive"


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
        description="Every current chunk embedded with the production model. Incremental and resumable: a chunk "
        "is embedded once per model version; a killed run resumes where it stopped. Records the drift signals of "
        "the chunks it embedded (embedding shift from the corpus centroid, OOV rate) for the retrain policy.",
    )
    @observed
    def document_embeddings(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return embed_corpus(context, state.store().scoped(spec.name))

    @dg.asset(
        key=spec.asset_path("retrieval_index"),
        deps=[document_embeddings],
        group_name=spec.name,
        kinds={"numpy"},
        tags={"domain": "serving"},
        retry_policy=IO_RETRY,
        automation_condition=follow,
        description="The retrieval index (normalised vectors + chunk ids) for the production model, swapped in "
        "atomically through the `retrieval_index` alias (reused when the promotion already built it).",
    )
    @observed
    def retrieval_index(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return index_corpus(context, state.store().scoped(spec.name))

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
        return answer_questions(context, config, state.store().scoped(spec.name), spec.answers)

    return [document_embeddings, retrieval_index, rag_answers]
