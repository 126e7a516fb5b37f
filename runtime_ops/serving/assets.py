"""Serving: embed the corpus with the production model, build the retrieval index, answer questions."""

import time
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np

from runtime_ops.documents.assets import document_chunks
from runtime_ops.models.assets import production_model
from runtime_ops.models.registry import load_embedder
from runtime_ops.resources.state import StateStoreResource
from runtime_ops.retries import IO_RETRY

_EMBED_BATCH = 256


def _production_version(store) -> int:  # type: ignore[no-untyped-def]
    version = store.alias("production")
    if version is None:
        raise dg.Failure("no production model yet: promote one first (production_model)")
    return int(version)


@dg.asset(
    deps=[document_chunks, production_model],
    group_name="serving",
    kinds={"python"},
    retry_policy=IO_RETRY,
    description="Every current chunk embedded with the production model. Incremental and resumable: a chunk "
    "is embedded once per model version; a killed run resumes where it stopped.",
)
def document_embeddings(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
    store = state.store()
    version = _production_version(store)
    embedder = load_embedder(store, version)
    before = store.embedding_counts(version)
    todo = before["current_chunks"] - before["embedded"]
    context.log.info(f"model v{version}: {before['embedded']} chunks embedded, {todo} to go")
    started = time.monotonic()
    written = 0
    while True:
        batch = store.chunks_missing_embeddings(version, _EMBED_BATCH)
        if not batch:
            break
        vectors = embedder.embed([text for _, text in batch])
        written += store.put_embeddings(version, zip([cid for cid, _ in batch], vectors, strict=True))
        context.log.info(f"embedded {written}/{todo} chunks")
    after = store.embedding_counts(version)
    return dg.MaterializeResult(
        metadata={
            "model_version": dg.MetadataValue.int(version),
            "embedded_now": dg.MetadataValue.int(written),
            "chunks": dg.MetadataValue.int(after["current_chunks"]),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
        }
    )


@dg.asset(
    deps=[document_embeddings],
    group_name="serving",
    kinds={"numpy"},
    retry_policy=IO_RETRY,
    description="The retrieval index (normalised vectors + chunk ids) for the production model, swapped in "
    "atomically through the `retrieval_index` alias.",
)
def retrieval_index(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
    from runtime_ops.models.embedder import digest
    from runtime_ops.serving.index import RetrievalIndex

    store = state.store()
    version = _production_version(store)
    revision = store.corpus_revision()
    ids: list[int] = []
    vecs: list[np.ndarray] = []
    for page in store.iter_current_embeddings(version):
        for cid, _key, raw in page:
            ids.append(cid)
            vecs.append(np.frombuffer(raw, dtype="<f4"))
    counts = store.embedding_counts(version)
    if len(ids) != counts["current_chunks"]:
        raise dg.Failure(
            f"{counts['current_chunks'] - len(ids)} current chunks have no embedding for model v{version}; "
            "materialize document_embeddings first"
        )
    dim = load_embedder(store, version).dim
    matrix = np.vstack(vecs).astype("<f4") if vecs else np.zeros((0, dim), dtype="<f4")
    index = RetrievalIndex(np.asarray(ids, dtype="<i8"), matrix)
    data = index.to_bytes()
    index_digest = digest(data)
    artifact_id = store.put_artifact("retrieval_index", data, index_digest)
    index_id = store.record_index(
        model_version=version,
        corpus_revision=revision,
        n_chunks=len(ids),
        artifact_id=artifact_id,
        run_id=context.run_id,
    )
    previous = store.set_alias("retrieval_index", index_id, actor=f"run:{context.run_id}", run_id=context.run_id)
    return dg.MaterializeResult(
        metadata={
            "index_id": dg.MetadataValue.int(index_id),
            "previous_index_id": dg.MetadataValue.int(previous or 0),
            "model_version": dg.MetadataValue.int(version),
            "corpus_revision": dg.MetadataValue.int(revision),
            "chunks": dg.MetadataValue.int(len(ids)),
            "digest": index_digest,
            "size_bytes": dg.MetadataValue.int(len(data)),
        },
        data_version=dg.DataVersion(index_digest[:16]),
    )


class AnswersConfig(dg.Config):
    questions: list[str] = []
    top_k: int = 4
    timeout_s: float = 20.0


def default_questions() -> list[str]:
    path = Path(__file__).parent.parent / "demo" / "questions.txt"
    return [q.strip() for q in path.read_text().splitlines() if q.strip()] if path.exists() else []


@dg.asset(
    deps=[retrieval_index],
    group_name="serving",
    kinds={"python"},
    retry_policy=IO_RETRY,
    description="Answers to questions from the retrieval index: extractive (best sentences of the top chunks) "
    "when no RUNTIME_OPS_MODEL_ENDPOINT is configured.",
)
def rag_answers(
    context: dg.AssetExecutionContext, config: AnswersConfig, state: StateStoreResource
) -> dg.MaterializeResult:
    from runtime_ops.serving.index import RetrievalIndex
    from runtime_ops.settings import get_settings

    store = state.store()
    meta = store.current_index()
    if meta is None:
        raise dg.Failure("no retrieval index yet: materialize retrieval_index first")
    index = RetrievalIndex.from_bytes(store.get_artifact(meta["artifact_id"]))
    embedder = load_embedder(store, meta["model_version"])
    questions = config.questions or default_questions()
    if not questions:
        raise dg.Failure("no questions: pass run config questions: [...] or ship demo/questions.txt")
    qvecs = embedder.embed(questions)
    hits = index.search(qvecs, config.top_k)
    texts = store.chunk_texts([cid for row in hits for cid, _ in row])
    settings = get_settings()
    llm = None
    if settings.model_endpoint:
        from runtime_ops.serving.endpoint import ChatEndpoint

        key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
        llm = ChatEndpoint(settings.model_endpoint, api_key=key, model=settings.model_name, timeout_s=config.timeout_s)
    fallbacks: list[str] = []
    rows = []
    lines = ["| question | answer | sources |", "|---|---|---|"]
    for question, qvec, row in zip(questions, qvecs, hits, strict=True):
        passages = [texts[cid][2] for cid, _ in row if cid in texts]
        sources = [
            {"key": texts[cid][0], "chunk_id": cid, "score": round(score, 4)} for cid, score in row if cid in texts
        ]
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
        cited = ", ".join(sorted({s["key"] for s in sources}))
        lines.append(f"| {question} | {answer.replace('|', '/').replace(chr(10), ' ')} | {cited} |")
    if llm is not None:
        llm.close()
    store.record_answers(rows)
    return dg.MaterializeResult(
        metadata={
            "questions": dg.MetadataValue.int(len(questions)),
            "index_id": dg.MetadataValue.int(meta["id"]),
            "model_version": dg.MetadataValue.int(meta["model_version"]),
            "answerer": "model endpoint" if llm is not None else "extractive",
            "endpoint_fallbacks": dg.MetadataValue.int(len(fallbacks)),
            "answers": dg.MetadataValue.md("\n".join(lines)),
        }
    )


def _answer(
    llm: Any,
    question: str,
    qvec: np.ndarray,
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
