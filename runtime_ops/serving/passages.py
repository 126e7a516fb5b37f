"""Retrieved chunks as passages: one passage per contiguous run of a document's chunks (pure, no I/O).

Consecutive chunks of a document share their overlap (the chunker repeats the end of one at the start of the
next), so when a search returns both, their texts hold the same sentences, or the same code block, twice. An
answer built from them, extractive or by a model, would repeat it and cite it twice. `merge_passages` joins each
run of consecutive chunks into one text with the overlap once; both answerers (`/api/answer` and `rag_answers`)
read passages, never raw chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime_ops.markdown import split_fenced, starts_inside_code


class Retrieved(Protocol):
    """What a search hit tells about its chunk (`runtime_ops.serving.search.SearchHit`)."""

    @property
    def chunk_id(self) -> int: ...
    @property
    def document_key(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def text(self) -> str: ...
    @property
    def document_id(self) -> int: ...
    @property
    def ord(self) -> int: ...


@dataclass(frozen=True)
class Passage:
    """Consecutive chunks of one document as one text; `score` is its best chunk's."""

    document_key: str
    title: str
    chunk_ids: tuple[int, ...]
    score: float
    text: str

    def as_source(self) -> dict[str, Any]:
        """How an answer cites it: the first chunk (`chunk_id`) and every chunk it joins (`chunk_ids`). No score: it
        is the serving model's own similarity and would tell a caller which model answered (`SearchHit.as_dict`)."""
        return {
            "document_key": self.document_key,
            "title": self.title,
            "chunk_id": self.chunk_ids[0],
            "chunk_ids": list(self.chunk_ids),
        }


def merge_passages(hits: Sequence[Retrieved]) -> list[Passage]:
    """One passage per run of consecutive chunks (by `ord`) of the same document version, in the order of each
    run's best-ranked hit (hits come best first)."""
    rank: dict[tuple[int, int], int] = {}
    by_document: dict[int, dict[int, Retrieved]] = {}
    for i, hit in enumerate(hits):
        rank.setdefault((hit.document_id, hit.ord), i)
        by_document.setdefault(hit.document_id, {}).setdefault(hit.ord, hit)
    runs: list[list[Retrieved]] = []
    for chunks in by_document.values():
        run: list[Retrieved] = []
        for hit in sorted(chunks.values(), key=lambda h: h.ord):
            if run and hit.ord != run[-1].ord + 1:
                runs.append(run)
                run = []
            run.append(hit)
        runs.append(run)
    runs.sort(key=lambda run: min(rank[(h.document_id, h.ord)] for h in run))
    return [
        Passage(
            document_key=run[0].document_key,
            title=run[0].title,
            chunk_ids=tuple(h.chunk_id for h in run),
            score=max(h.score for h in run),
            text=_join_run([h.text for h in run]),
        )
        for run in runs
    ]


def _join_run(texts: Sequence[str]) -> str:
    joined = texts[0]
    for text in texts[1:]:
        joined = join_overlapping(joined, text)
    return joined


def join_overlapping(first: str, second: str) -> str:
    """`second` appended to `first` without the text they share: the longest end of `first`, starting at a word,
    that `second` starts with. Chunks with nothing shared (the chunker drops the overlap where it does not fit,
    and never repeats code) are joined as separate paragraphs, or as lines where `first` ends inside a code
    block."""
    for start in range(max(0, len(first) - len(second)), len(first)):
        at_word = start == 0 or (first[start - 1].isspace() and not first[start].isspace())
        if at_word and second.startswith(first[start:]):
            return first + second[len(first) - start :]
    return first + ("\n" if _ends_inside_code(first) else "\n\n") + second


def _ends_inside_code(text: str) -> bool:
    blocks = split_fenced(text, inside=starts_inside_code(text))
    return bool(blocks) and blocks[-1].code and not blocks[-1].closed
