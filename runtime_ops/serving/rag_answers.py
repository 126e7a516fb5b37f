"""The work of `rag_answers`: answer questions from the retrieval index (a model endpoint, else extractively),
once per index, question and answerer (the asset is defined in `serving/assets.py`)."""

import hashlib
from typing import Any

import dagster as dg

from runtime_ops.markdown import close_fences, code_span, escape_text
from runtime_ops.pipeline.spec import AnswersSpec
from runtime_ops.serving.endpoint import ChatEndpoint
from runtime_ops.serving.passages import merge_passages
from runtime_ops.store import StateStore
from runtime_ops.store.registry.artifacts import Artifacts
from runtime_ops.store.registry.registry import Registry
from runtime_ops.tags import QUESTION_SET_ALIAS
from runtime_ops.vectors.base import VectorStore


class AnswersConfig(dg.Config):
    questions: list[str] = []
    top_k: int = 4
    timeout_s: float = 20.0


# Questions rag_answers asks when the pipeline names no questions file: a few of its own evaluation questions.
SAMPLE_QUESTIONS = 5


def default_questions(registry: Registry, artifacts: Artifacts, answers: AnswersSpec) -> list[str]:
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
    artifact_id = registry.alias(QUESTION_SET_ALIAS)
    if artifact_id is None:
        return []
    rows = [json.loads(line) for line in artifacts.get_artifact(artifact_id).decode("utf-8").splitlines() if line]
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

    # numpy: kept out of the code location's load
    from runtime_ops.serving.answerer import answer_with
    from runtime_ops.serving.search import NoServingIndex, Searcher

    questions = config.questions or default_questions(store.registry, store.artifacts, answers)
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
