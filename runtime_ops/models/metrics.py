"""Retrieval metrics on a golden question set: ranking documents by their best chunk, recall@k / nDCG@k / MRR.

Pure functions over numpy arrays so the same code scores a candidate and the production model and is
unit-tested without Dagster. Relevance is binary and judged at document level (a golden question
names the documents that answer it, not chunks, because chunking changes between model versions).
The golden set itself is read in `models/golden.py`; the report's comparison table is `models/report_markdown.py`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

import numpy as np

from runtime_ops.models.golden import GoldenQuestion, evaluable

__all__ = [
    "StreamingRanker",
    "SupportsEmbed",
    "evaluate_embedder",
    "per_question_metrics",
    "rank_documents",
    "retrieval_metrics",
]

# Upper bound on the query-by-chunk score block (float32 elements): 4M is 16 MB, which keeps
# 100 queries x 100k chunks to a few blocks instead of one 40 MB matrix plus temporaries.
_BLOCK_ELEMENTS = 4_000_000


class SupportsEmbed(Protocol):
    """Anything that embeds texts into L2-normalised rows (the LSA embedder, or a pretrained one)."""

    def embed(self, texts: Sequence[str], batch_size: int = ...) -> np.ndarray: ...


def rank_documents(
    query_vecs: np.ndarray,
    chunk_vecs: np.ndarray,
    chunk_doc_keys: Sequence[str],
    top_k: int,
) -> list[list[str]]:
    """Top-k distinct documents per query, each document scored by its best chunk (cosine).

    Ties are broken by the document's first appearance in `chunk_doc_keys` so rankings are stable.
    A query whose vector is all zeros (no known term) gets an empty ranking: it carries no signal,
    and an arbitrary order would hand out chance credit.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    queries = np.asarray(query_vecs, dtype=np.float32)
    chunks = np.asarray(chunk_vecs, dtype=np.float32)
    if queries.ndim != 2 or chunks.ndim != 2:
        raise ValueError(f"expected 2-D arrays, got query {queries.shape} and chunk {chunks.shape}")
    if len(chunk_doc_keys) != chunks.shape[0]:
        raise ValueError(f"{len(chunk_doc_keys)} doc keys for {chunks.shape[0]} chunk vectors")
    if chunks.shape[0] and queries.shape[0] and queries.shape[1] != chunks.shape[1]:
        raise ValueError(f"dimension mismatch: queries {queries.shape[1]}, chunks {chunks.shape[1]}")
    if not (np.isfinite(queries).all() and np.isfinite(chunks).all()):
        raise ValueError("query or chunk vectors contain NaN or infinity")
    if chunks.shape[0] == 0:
        return [[] for _ in range(queries.shape[0])]

    doc_keys, codes = _encode_keys(chunk_doc_keys)
    # Group chunks by document so np.maximum.reduceat can take each document's best chunk score.
    # Chunks usually arrive grouped already; only permute score columns when they do not.
    order: np.ndarray | None = None
    if np.any(codes[1:] < codes[:-1]):
        order = np.argsort(codes, kind="stable")
        codes = codes[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    n_docs = len(doc_keys)
    k = min(top_k, n_docs)
    empty_query = ~np.any(queries != 0, axis=1)

    ranked: list[list[str]] = []
    block = max(1, _BLOCK_ELEMENTS // chunks.shape[0])
    for start in range(0, queries.shape[0], block):
        scores = queries[start : start + block] @ chunks.T
        if order is not None:
            scores = scores[:, order]
        doc_scores = np.maximum.reduceat(scores, starts, axis=1)  # column j is document code j
        best = _top_documents(doc_scores, k)
        for row, docs in enumerate(best):
            if empty_query[start + row]:
                ranked.append([])
            else:
                ranked.append([doc_keys[i] for i in docs])
    return ranked


def _top_documents(doc_scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the codes of the `k` best-scoring documents, best first; ties go to the lower code (the document
    seen first in corpus order)."""
    n_docs = doc_scores.shape[1]
    if k < n_docs:
        candidates = np.argpartition(-doc_scores, k - 1, axis=1)[:, :k]
    else:
        candidates = np.broadcast_to(np.arange(n_docs), doc_scores.shape).copy()
    cand_scores = np.take_along_axis(doc_scores, candidates, axis=1)
    within = np.lexsort((candidates, -cand_scores), axis=1)
    return np.take_along_axis(candidates, within, axis=1)


def _encode_keys(keys: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Integer codes in first-appearance order, so tie-breaking follows corpus order."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys))
    return list(index), codes


def per_question_metrics(
    ranked: Sequence[Sequence[str]],
    relevant: Sequence[Collection[str]],
    ks: Sequence[int] = (1, 5, 10),
) -> dict[str, np.ndarray]:
    """Recall@k, nDCG@k (binary gains, log2 discount) and reciprocal rank for each question.

    Each value is a float64 array with one entry per question, in input order, so two models
    scored on the same questions can be compared pairwise (see `policies.bootstrap.paired_bootstrap`).
    Keys are `recall@k` for each k, then `ndcg@k` for each k (ascending k), then `mrr`.
    The reciprocal rank uses the whole ranked list, so MRR is effectively MRR@len(ranked list).
    """
    if len(ranked) != len(relevant):
        raise ValueError(f"{len(ranked)} rankings for {len(relevant)} relevance sets")
    if not ranked:
        raise ValueError("no questions to evaluate: metrics over zero questions are undefined")
    ks = sorted(dict.fromkeys(ks))
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {ks}")

    n = len(ranked)
    max_k = max(ks)
    discounts = 1.0 / np.log2(np.arange(2, max_k + 2))
    ideal = np.cumsum(discounts)  # ideal[i] = IDCG with i+1 relevant documents
    recall = {k: np.zeros(n) for k in ks}
    ndcg = {k: np.zeros(n) for k in ks}
    rr = np.zeros(n)
    for position, (ranking, rel) in enumerate(zip(ranked, relevant, strict=True)):
        rel_set = set(rel)
        if not rel_set:
            raise ValueError(f"question #{position} has no relevant documents; recall is undefined")
        # A document listed twice counts once: a ranking must not earn credit for repetition.
        hits = [doc in rel_set for doc in dict.fromkeys(ranking)]
        first_hit = next((i for i, hit in enumerate(hits) if hit), None)
        rr[position] = 0.0 if first_hit is None else 1.0 / (first_hit + 1)
        for k in ks:
            top = hits[:k]
            recall[k][position] = sum(top) / len(rel_set)
            dcg = sum(discounts[i] for i, hit in enumerate(top) if hit)
            ndcg[k][position] = dcg / ideal[min(k, len(rel_set)) - 1]

    metrics: dict[str, np.ndarray] = {f"recall@{k}": recall[k] for k in ks}
    metrics.update({f"ndcg@{k}": ndcg[k] for k in ks})
    metrics["mrr"] = rr
    return metrics


def retrieval_metrics(
    ranked: Sequence[Sequence[str]],
    relevant: Sequence[Collection[str]],
    ks: Sequence[int] = (1, 5, 10),
) -> dict[str, float]:
    """Mean recall@k, nDCG@k and MRR over the questions (see `per_question_metrics`), plus `questions`."""
    per_question = per_question_metrics(ranked, relevant, ks)
    metrics = {name: float(values.mean()) for name, values in per_question.items()}
    metrics["questions"] = float(len(ranked))
    return metrics


class StreamingRanker:
    """`rank_documents` over chunks that arrive in batches, without holding every chunk vector.

    Keeps, for each query, the best score seen so far per document: memory is
    O(queries x documents) float32 plus one bounded score block per `add`, independent of the
    number of chunks. Documents get codes in first-appearance order across all batches, so
    `ranked()` equals `rank_documents` on the concatenated batches, tie-breaking included, and a
    document's chunks may be spread over any number of batches in any order.
    """

    def __init__(self, query_vecs: np.ndarray, top_k: int) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        queries = np.asarray(query_vecs, dtype=np.float32)
        if queries.ndim != 2:
            raise ValueError(f"expected a 2-D query array, got shape {queries.shape}")
        if not np.isfinite(queries).all():
            raise ValueError("query vectors contain NaN or infinity")
        self._queries = queries
        self._top_k = top_k
        self._index: dict[str, int] = {}
        # Columns beyond len(self._index) are spare capacity (grown by doubling, so adding
        # documents one batch at a time costs amortised O(queries) per document).
        self._scores = np.full((queries.shape[0], 16), -np.inf, dtype=np.float32)
        self._empty_query = ~np.any(queries != 0, axis=1)

    @property
    def documents(self) -> int:
        return len(self._index)

    def add(self, chunk_vecs: np.ndarray, doc_keys: Sequence[str]) -> None:
        """Score one batch of chunks (rows of `chunk_vecs`, each belonging to `doc_keys[i]`)."""
        chunks = np.asarray(chunk_vecs, dtype=np.float32)
        if chunks.ndim != 2:
            raise ValueError(f"expected a 2-D chunk array, got shape {chunks.shape}")
        if len(doc_keys) != chunks.shape[0]:
            raise ValueError(f"{len(doc_keys)} doc keys for {chunks.shape[0]} chunk vectors")
        if chunks.shape[0] == 0:
            return
        if self._queries.shape[0] and self._queries.shape[1] != chunks.shape[1]:
            raise ValueError(f"dimension mismatch: queries {self._queries.shape[1]}, chunks {chunks.shape[1]}")
        if not np.isfinite(chunks).all():
            raise ValueError("chunk vectors contain NaN or infinity")

        index = self._index
        codes = np.fromiter(
            (index.setdefault(key, len(index)) for key in doc_keys), dtype=np.int64, count=len(doc_keys)
        )
        self._reserve(len(index))
        order: np.ndarray | None = None
        if np.any(codes[1:] < codes[:-1]):
            order = np.argsort(codes, kind="stable")
            codes = codes[order]
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        batch_docs = codes[starts]  # distinct document codes of this batch, ascending
        block = max(1, _BLOCK_ELEMENTS // chunks.shape[0])
        for start in range(0, self._queries.shape[0], block):
            scores = self._queries[start : start + block] @ chunks.T
            if order is not None:
                scores = scores[:, order]
            best = np.maximum.reduceat(scores, starts, axis=1)
            rows = self._scores[start : start + block]  # a view: updated in place
            rows[:, batch_docs] = np.maximum(rows[:, batch_docs], best)

    def _reserve(self, n_docs: int) -> None:
        capacity = self._scores.shape[1]
        if n_docs <= capacity:
            return
        while capacity < n_docs:
            capacity *= 2
        grown = np.full((self._scores.shape[0], capacity), -np.inf, dtype=np.float32)
        grown[:, : self._scores.shape[1]] = self._scores
        self._scores = grown

    def ranked(self) -> list[list[str]]:
        """Top-k documents per query, as `rank_documents` would return for all chunks added so far."""
        n_queries = self._queries.shape[0]
        n_docs = len(self._index)
        if n_docs == 0:
            return [[] for _ in range(n_queries)]
        doc_keys = list(self._index)
        doc_scores = self._scores[:, :n_docs]
        k = min(self._top_k, n_docs)
        ranked: list[list[str]] = []
        block = max(1, _BLOCK_ELEMENTS // n_docs)
        for start in range(0, n_queries, block):
            best = _top_documents(doc_scores[start : start + block], k)
            for row, docs in enumerate(best):
                ranked.append([] if self._empty_query[start + row] else [doc_keys[i] for i in docs])
        return ranked


def evaluate_embedder(
    embedder: SupportsEmbed,
    chunk_texts: Sequence[str],
    chunk_doc_keys: Sequence[str],
    questions: Sequence[GoldenQuestion],
    ks: Sequence[int] = (1, 5, 10),
    *,
    only_evaluable: bool = True,
) -> dict[str, float]:
    """Embed chunks and questions, rank documents, and score against the golden set.

    With `only_evaluable` (the default) questions whose documents are absent from the corpus are
    dropped first, see `evaluable`; a ValueError is raised if none remain.
    """
    if len(chunk_texts) != len(chunk_doc_keys):
        raise ValueError(f"{len(chunk_texts)} chunk texts for {len(chunk_doc_keys)} doc keys")
    selected = evaluable(questions, set(chunk_doc_keys)) if only_evaluable else list(questions)
    if not selected:
        raise ValueError(f"none of the {len(questions)} golden questions has a relevant document in the corpus")
    chunk_vecs = embedder.embed(chunk_texts)
    query_vecs = embedder.embed([q.question for q in selected])
    ranked = rank_documents(query_vecs, chunk_vecs, chunk_doc_keys, top_k=max(ks))
    return retrieval_metrics(ranked, [q.relevant for q in selected], ks)
