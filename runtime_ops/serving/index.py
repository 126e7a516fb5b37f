"""The retrieval index: a matrix of normalised chunk vectors with their ids, in a deterministic container."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np


@dataclass
class RetrievalIndex:
    chunk_ids: np.ndarray  # int64, shape (n,)
    vectors: np.ndarray  # float32, shape (n, dim), rows L2-normalised

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.save(buf, self.chunk_ids.astype("<i8"), allow_pickle=False)
        np.save(buf, self.vectors.astype("<f4"), allow_pickle=False)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> RetrievalIndex:
        buf = io.BytesIO(data)
        ids = np.load(buf, allow_pickle=False)
        vecs = np.load(buf, allow_pickle=False)
        if ids.shape[0] != vecs.shape[0]:
            raise ValueError(f"corrupt index: {ids.shape[0]} ids for {vecs.shape[0]} vectors")
        return cls(ids, vecs)

    def search(self, query_vecs: np.ndarray, top_k: int) -> list[list[tuple[int, float]]]:
        if len(self.chunk_ids) == 0:
            return [[] for _ in range(len(query_vecs))]
        scores = query_vecs @ self.vectors.T
        k = min(top_k, scores.shape[1])
        out = []
        for row in scores:
            top = np.argpartition(-row, k - 1)[:k]
            top = top[np.argsort(-row[top])]
            out.append([(int(self.chunk_ids[i]), float(row[i])) for i in top])
        return out
