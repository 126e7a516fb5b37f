"""A deterministic, bounded sample of a stream of texts (pure).

Training an LSA model on every chunk makes its memory and time grow with the corpus. Fitting on at most
`limit` chunks chosen by a keyed hash of their text keeps both flat; the choice depends only on the texts and
the seed (not on chunk ids or arrival order), so the same corpus gives the same sample and the same model, and
a few new documents change the sample only a little.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable


def _rank(seed: int, text: str) -> int:
    key = seed.to_bytes(8, "little", signed=False)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8, key=key).digest())


def bounded_sample(texts: Iterable[str], limit: int, *, seed: int = 0) -> tuple[list[str], int]:
    """(at most `limit` texts, in rank order; how many texts were seen). Memory is O(limit)."""
    if limit < 1:
        raise ValueError(f"sample limit must be >= 1, got {limit}")
    heap: list[tuple[int, str]] = []  # max-heap by rank via negation: the `limit` smallest ranks are kept
    seen = 0
    for text in texts:
        seen += 1
        item = (-_rank(seed, text), text)
        if len(heap) < limit:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    return [text for _, text in sorted(heap, reverse=True)], seen
