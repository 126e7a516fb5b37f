"""Retrieved chunks become passages: consecutive chunks of a document are one passage with their overlap once, so
an answer (extractive or the model's prompt) never holds the same passage twice."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtime_ops.demo import CORPUS_DIR, corpus_keys
from runtime_ops.documents.chunking import chunk_text
from runtime_ops.documents.parsing import parse_document
from runtime_ops.serving.answerer import answer_hits, split_sentences
from runtime_ops.serving.endpoint import build_messages
from runtime_ops.serving.passages import join_overlapping, merge_passages


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    document_key: str
    title: str
    score: float
    text: str
    document_id: int
    ord: int


def _hits(document_id: int, chunks: Sequence[str], ords: Sequence[int], first_score: float = 0.9) -> list[Hit]:
    """Hits for the chunks at `ords` of one document, in that rank order (scores falling)."""
    key, title = f"doc{document_id}.md", f"Doc {document_id}"
    return [
        Hit(document_id * 1000 + o, key, title, first_score - i / 100, chunks[o], document_id, o)
        for i, o in enumerate(ords)
    ]


FILLER = " ".join(f"Filler sentence number {i} talks about nothing in particular." for i in range(16))
KEY = "The quokka export is pretty-printed with json.tool and a pipe."
TAIL = " ".join(f"Closing remark {i} is about something else entirely." for i in range(16))
DOCUMENT = f"{FILLER}\n\n{KEY}\n\n{TAIL}"


def _overlapping_chunks() -> list[str]:
    chunks = chunk_text(DOCUMENT)
    # What the answer must not repeat: the chunker put the key sentence at the end of one chunk and, as shared
    # context, at the start of the next.
    assert len(chunks) == 2 and KEY in chunks[0] and KEY in chunks[1], chunks
    return chunks


def test_consecutive_chunks_are_one_passage_with_their_overlap_once() -> None:
    chunks = _overlapping_chunks()
    [passage] = merge_passages(_hits(7, chunks, [1, 0]))  # the later chunk ranked first
    assert passage.text.count(KEY) == 1
    assert passage.text.split() == DOCUMENT.split()  # the document's words, in order, each once
    assert passage.chunk_ids == (7000, 7001) and passage.score == 0.9 and passage.document_key == "doc7.md"
    assert passage.as_source() == {
        "document_key": "doc7.md",
        "title": "Doc 7",
        "chunk_id": 7000,
        "chunk_ids": [7000, 7001],
    }  # no score: it would tell a caller which model answered


def test_runs_documents_and_rank_order_are_kept_apart() -> None:
    chunks = [f"Chunk {i} of the text." for i in range(5)]
    hits = [
        *_hits(1, chunks, [3], first_score=0.95),
        *_hits(2, chunks, [0, 1], first_score=0.9),  # another document's chunks with the same ords
        *_hits(1, chunks, [0, 4, 1], first_score=0.8),  # 0-1 is a run; 3-4 is a run; 2 was not retrieved
    ]
    passages = merge_passages(hits)
    assert [(p.document_key, p.chunk_ids) for p in passages] == [
        ("doc1.md", (1003, 1004)),  # ranked by their best hit
        ("doc2.md", (2000, 2001)),
        ("doc1.md", (1000, 1001)),
    ]
    assert passages[0].text == "Chunk 3 of the text.\n\nChunk 4 of the text."  # nothing shared: two paragraphs
    assert merge_passages([]) == []


def test_a_code_block_in_two_chunks_is_given_once() -> None:
    code = "```python\nprint(json.dumps(data, indent=2))\n```"
    first, second = f"Pretty-print it:\n\n{code}", f"{code}\n\nThat indents by two spaces."
    assert join_overlapping(first, second) == f"Pretty-print it:\n\n{code}\n\nThat indents by two spaces."
    # A chunk that ends inside a code block goes on with its next lines as lines, not as a new paragraph.
    assert join_overlapping("```sh\nls -l", "wc -l\n```") == "```sh\nls -l\nwc -l\n```"
    # Shared text counts only from the start of a word: "end" is no overlap of "send".
    assert join_overlapping("we send", "end of it") == "we send\n\nend of it"


def test_every_shipped_document_merged_from_its_chunks_reads_as_written() -> None:
    rng = random.Random(25)
    keys = sorted(k for k in corpus_keys() if k.endswith((".md", ".txt")))
    for key in keys:
        text = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 * 1024 * 1024).text
        chunks = chunk_text(text)
        order = list(range(len(chunks)))
        rng.shuffle(order)  # the ranking a search might give
        [passage] = merge_passages(_hits(1, chunks, order))
        assert passage.text.split() == text.split(), key  # every word once, in order: no overlap left, none lost


def _words(texts: Sequence[str]) -> np.ndarray:
    vocab = ["quokka", "json.tool", "pipe", "filler", "closing"]
    return np.array([[t.lower().count(w) for w in vocab] for t in texts], dtype=float)


class _Chat:
    """A model endpoint that records the messages it was sent (the prompt `ChatEndpoint.answer` would post)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def answer(self, question: str, passages: list[str]) -> str:
        self.prompts.append(build_messages(question, passages)[-1]["content"])
        return "From [1]."


def test_an_answer_never_holds_the_same_passage_twice() -> None:
    chunks = _overlapping_chunks()
    hits = _hits(3, chunks, [0, 1])
    question = _words(["quokka json.tool pipe"])[0]
    extractive = answer_hits(None, "How is the quokka export printed?", question, hits, _words)
    assert extractive.answerer == "extractive" and extractive.text.count(KEY) == 1, extractive.text
    parts = split_sentences(extractive.text)
    assert len(parts) == len(set(parts)), extractive.text
    chat = _Chat()
    model = answer_hits(chat, "How is the quokka export printed?", question, hits, _words)
    [prompt] = chat.prompts
    assert model.answerer == "model" and prompt.count(KEY) == 1 and "[2]" not in prompt, prompt
    assert [s["chunk_ids"] for s in model.sources()] == [[3000, 3001]]  # cited once
