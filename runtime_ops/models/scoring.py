"""Scoring a model on the question set in bounded memory (glue over the store, no Dagster).

The corpus is streamed page by page: the candidate embeds each page and the page's vectors are folded into a
`StreamingRanker` (best score per question and document) and dropped, so memory grows with questions x
documents, never with chunks x dimensions. The production model is not re-embedded: its vectors are already
stored for serving and are read back the same way (any chunk not yet embedded is embedded and stored first).
Neither is what a backfill (`shadow_embeddings`) already stored for the candidate: only the rest is embedded,
and not stored, so a rejected candidate leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from runtime_ops.documents.chunk_profiles import ensure_model_chunks
from runtime_ops.embedders.base import TextEmbedder
from runtime_ops.models.golden import GoldenQuestion
from runtime_ops.models.metrics import StreamingRanker, per_question_metrics
from runtime_ops.serving.indexing import embed_missing
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.embeddings import Embeddings

PAGE = 2048
KS = (1, 5, 10)


@dataclass
class Scored:
    questions: list[GoldenQuestion]  # the questions whose relevant documents are in the corpus
    ranked: list[list[str]]  # top documents per question, same order
    per_question: dict[str, np.ndarray]  # metric -> value per question
    chunks: int
    stored: int = 0  # of `chunks`, how many were read from stored vectors instead of embedded

    @property
    def means(self) -> dict[str, float]:
        out = {name: float(values.mean()) for name, values in self.per_question.items()}
        out["questions"] = float(len(self.questions))
        return out

    def subset(self, questions: Collection[GoldenQuestion]) -> Scored | None:
        """The scores of those of `questions` that were scored (None: none was): sets scored in one pass over the
        corpus are reported apart (each question's scores depend on that question alone)."""
        wanted = questions if isinstance(questions, set | frozenset) else set(questions)
        keep = [i for i, q in enumerate(self.questions) if q in wanted]
        if not keep:
            return None
        per_question = {name: values[keep] for name, values in self.per_question.items()}
        questions_kept, ranked = [self.questions[i] for i in keep], [self.ranked[i] for i in keep]
        return Scored(questions_kept, ranked, per_question, self.chunks, self.stored)


def _candidate_pages(
    embeddings: Embeddings, version: int, embedder: TextEmbedder, reused: list[int]
) -> Iterator[tuple[list[str], np.ndarray]]:
    for page in embeddings.iter_current_chunks_with_vectors(version, batch_size=PAGE):
        vectors = np.empty((len(page), embedder.dim), dtype=np.float32)
        missing = [i for i, (_, _, _, raw) in enumerate(page) if raw is None]
        if missing:
            vectors[missing] = embedder.embed([page[i][2] for i in missing])
        for i, (_, _, _, raw) in enumerate(page):
            if raw is not None:
                vectors[i] = np.frombuffer(raw, dtype="<f4")
        reused[0] += len(page) - len(missing)
        yield [key for _, key, _, _ in page], vectors


def _stored_pages(embeddings: Embeddings, version: int, dim: int) -> Iterator[tuple[list[str], np.ndarray]]:
    for page in embeddings.iter_current_embeddings(version, batch_size=PAGE):
        vectors = np.frombuffer(b"".join(raw for _, _, raw in page), dtype="<f4").reshape(len(page), dim)
        yield [key for _, key, _ in page], vectors


def score_pages(
    pages: Iterator[tuple[list[str], np.ndarray]],
    query_vecs: np.ndarray,
    questions: Sequence[GoldenQuestion],
    ks: Sequence[int] = KS,
) -> Scored:
    ranker = StreamingRanker(query_vecs, top_k=max(ks))
    seen: set[str] = set()
    chunks = 0
    for keys, vectors in pages:
        ranker.add(vectors, keys)
        seen.update(keys)
        chunks += len(keys)
    ranked = ranker.ranked()
    kept = [i for i, q in enumerate(questions) if any(key in seen for key in q.relevant)]
    selected = [questions[i] for i in kept]
    narrowed = [tuple(k for k in q.relevant if k in seen) for q in selected]
    if not selected:
        raise ValueError(f"none of the {len(questions)} evaluation questions has a relevant document in the corpus")
    kept_ranked = [ranked[i] for i in kept]
    return Scored(selected, kept_ranked, per_question_metrics(kept_ranked, narrowed, ks), chunks)


def score_candidate(
    store: StateStore, version: int, embedder: TextEmbedder, questions: Sequence[GoldenQuestion]
) -> Scored:
    """Score candidate `version` (embedded by `embedder`) without storing anything: its stored vectors where a
    backfill left them, the other chunks embedded page by page."""
    ensure_model_chunks(store.documents, store.profiles, version)
    query_vecs = embedder.embed([q.question for q in questions])
    reused = [0]
    scored = score_pages(_candidate_pages(store.embeddings, version, embedder, reused), query_vecs, questions)
    scored.stored = reused[0]
    return scored


def score_stored(
    store: StateStore,
    version: int,
    embedder: TextEmbedder,
    questions: Sequence[GoldenQuestion],
    log: Callable[[str], None] = lambda _: None,
) -> Scored:
    """Score `version` from its stored vectors (embedding, and storing, only the chunks it has none for)."""
    embed_missing(store, version, log, embedder=embedder)
    query_vecs = embedder.embed([q.question for q in questions])
    return score_pages(_stored_pages(store.embeddings, version, embedder.dim), query_vecs, questions)
