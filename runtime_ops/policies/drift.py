"""Drift signals of a landing batch against the model that embedded it (pure: numpy, no I/O).

- `embedding_shift`: 1 - cosine between the mean vector of the newly embedded chunks and the corpus centroid
  (the mean of every chunk embedded with that model before them). 0: the batch sits where the corpus is;
  1: orthogonal, nothing in common; a batch the model cannot represent at all (every vector zero) is 1.
- `oov_rate`: the fraction of the batch's tokens the model's vocabulary does not know.

The centroid is maintained as a running sum of vectors and their count, stored with each signal (per model
version): the next batch's centroid is the previous sum / count, then the batch is added. It follows the chunks
embedded with the model; a superseded or quarantined document's vector is not subtracted (an approximation
that a retrain resets, as the next model starts its own sum).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

# The LSA embedder's default analyzer: lowercased, accents stripped, tokens of two or more word characters.
TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
# Texts of each embedded page whose tokens count towards the OOV rate, spread over the page: 8 of 256 chunks
# (~800 tokens) estimate a rate within about 2 points per page; re-tokenising more cost ~5% of an lsa pass.
OOV_SAMPLE_PER_PAGE = 8


def _strip_accents(text: str) -> str:
    if text.isascii():  # nothing to strip: skips a per-character pass over most text
        return text
    normalized = unicodedata.normalize("NFKD", text)
    return "".join(c for c in normalized if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    return TOKEN_PATTERN.findall(_strip_accents(text.lower()))


def _unit(vector: np.ndarray) -> np.ndarray | None:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else None


def embedding_shift(new_vecs: np.ndarray, corpus_centroid: np.ndarray | None) -> float:
    """1 - cos(mean of `new_vecs`, `corpus_centroid`), in [0, 2]. Nothing to compare (no new vectors, no or a
    zero centroid) is 0.0; new vectors that are all zero (the model knows none of their terms) are 1.0."""
    vecs = np.asarray(new_vecs, dtype=np.float64)
    if vecs.size == 0 or corpus_centroid is None:
        return 0.0
    centroid = _unit(np.asarray(corpus_centroid, dtype=np.float64))
    if centroid is None:
        return 0.0
    mean = _unit(vecs.reshape(len(vecs), -1).mean(axis=0))
    if mean is None:
        return 1.0
    return float(min(2.0, max(0.0, 1.0 - float(mean @ centroid))))


def oov_rate(texts: Iterable[str], vocabulary_contains: Callable[[str], bool]) -> float:
    """The fraction of the texts' tokens for which `vocabulary_contains(token)` is false (0.0 without tokens)."""
    known, total = count_known_tokens(texts, vocabulary_contains)
    return (total - known) / total if total else 0.0


def count_known_tokens(texts: Iterable[str], vocabulary_contains: Callable[[str], bool]) -> tuple[int, int]:
    """(known tokens, all tokens) of the texts."""
    known = total = 0
    for text in texts:
        for token in tokens(text):
            total += 1
            known += bool(vocabulary_contains(token))
    return known, total


@dataclass
class Centroid:
    """A running sum of vectors and their count: the centroid of everything added so far."""

    sum: np.ndarray
    count: int = 0

    @classmethod
    def empty(cls, dim: int) -> Centroid:
        return cls(np.zeros(dim, dtype=np.float64), 0)

    @classmethod
    def from_bytes(cls, data: bytes, count: int) -> Centroid:
        return cls(np.frombuffer(data, dtype="<f8").copy(), count)

    def to_bytes(self) -> bytes:
        return np.asarray(self.sum, dtype="<f8").tobytes()

    def add(self, vectors: np.ndarray) -> None:
        vecs = np.asarray(vectors, dtype=np.float64)
        if vecs.size:
            self.sum = self.sum + vecs.reshape(len(vecs), -1).sum(axis=0)
            self.count += len(vecs)

    def plus(self, other: Centroid) -> Centroid:
        return Centroid(self.sum + other.sum, self.count + other.count)

    def minus(self, other: Centroid) -> Centroid:
        return Centroid(self.sum - other.sum, max(0, self.count - other.count))

    @property
    def mean(self) -> np.ndarray | None:
        return self.sum / self.count if self.count else None


class BatchDrift:
    """Accumulates the vectors and texts of one embedding pass, page by page (nothing kept but sums)."""

    def __init__(self, vocabulary_contains: Callable[[str], bool] | None) -> None:
        # None: the model has no vocabulary (a pretrained subword model), so there is no OOV rate.
        self._contains = vocabulary_contains
        self.batch: Centroid | None = None
        self.known = 0
        self.tokens = 0

    def observe(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        vecs = np.asarray(vectors, dtype=np.float64)
        if self.batch is None:
            self.batch = Centroid.empty(vecs.shape[1] if vecs.ndim == 2 else 0)
        self.batch.add(vecs)
        if self._contains is not None:
            # The OOV rate is a share: a sample of each page estimates it as well as every token would, at a
            # fraction of the cost (tokenising every chunk again doubled the embedding pass).
            step = max(1, len(texts) // OOV_SAMPLE_PER_PAGE)
            known, total = count_known_tokens(texts[::step][:OOV_SAMPLE_PER_PAGE], self._contains)
            self.known += known
            self.tokens += total

    @property
    def chunks(self) -> int:
        return self.batch.count if self.batch is not None else 0

    @property
    def oov_rate(self) -> float | None:
        if self._contains is None:
            return None
        return (self.tokens - self.known) / self.tokens if self.tokens else 0.0

    def shift_from(self, corpus: Centroid | None) -> float:
        """The batch's embedding shift from `corpus` (the centroid before the batch)."""
        if self.batch is None or not self.batch.count:
            return 0.0
        mean = self.batch.mean
        assert mean is not None
        return embedding_shift(mean.reshape(1, -1), corpus.mean if corpus is not None else None)
