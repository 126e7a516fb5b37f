"""The reviewed golden set: its questions (id, question, relevant document keys), read from JSONL with every problem
reported as `<path>:<line>: <what is wrong>`, and narrowed to the documents a corpus holds (pure, no Dagster).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["GoldenQuestion", "evaluable", "load_golden_set"]


@dataclass(frozen=True)
class GoldenQuestion:
    id: str
    question: str
    relevant: tuple[str, ...]


def load_golden_set(path: Path) -> list[GoldenQuestion]:
    """Read a JSONL golden set; every problem is reported as `<path>:<line>: <what is wrong>`."""
    path = Path(path)
    questions: list[GoldenQuestion] = []
    first_seen: dict[str, int] = {}
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}: not valid UTF-8 ({exc})") from exc
            if not line.strip():
                continue  # blank lines (e.g. a trailing newline) are not questions
            question = _parse_golden_line(line, where)
            if question.id in first_seen:
                raise ValueError(
                    f"{where}: duplicate id {question.id!r} (first defined on line {first_seen[question.id]})"
                )
            first_seen[question.id] = lineno
            questions.append(question)
    if not questions:
        raise ValueError(f"{path}: golden set contains no questions")
    return questions


def _parse_golden_line(line: str, where: str) -> GoldenQuestion:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for field in ("id", "question", "relevant"):
        if field not in record:
            raise ValueError(f"{where}: missing field {field!r}")
    qid, text, relevant = record["id"], record["question"], record["relevant"]
    if not isinstance(qid, str) or not qid.strip():
        raise ValueError(f"{where}: 'id' must be a non-empty string")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: 'question' must be a non-empty string")
    if not isinstance(relevant, list) or not all(isinstance(k, str) and k for k in relevant):
        raise ValueError(f"{where}: 'relevant' must be a list of non-empty document keys")
    if not relevant:
        raise ValueError(f"{where}: 'relevant' is empty; a question needs at least one relevant document")
    # dict.fromkeys de-duplicates while keeping the author's order.
    return GoldenQuestion(id=qid, question=text, relevant=tuple(dict.fromkeys(relevant)))


def evaluable(questions: Sequence[GoldenQuestion], corpus_keys: Collection[str]) -> list[GoldenQuestion]:
    """Keep questions answerable from this corpus, with `relevant` narrowed to keys present in it.

    A question whose documents were never ingested scores zero for every model, which only dilutes
    the comparison; narrowing `relevant` keeps recall's denominator to what retrieval could find.
    """
    present = corpus_keys if isinstance(corpus_keys, set | frozenset) else set(corpus_keys)
    kept: list[GoldenQuestion] = []
    for question in questions:
        relevant = tuple(key for key in question.relevant if key in present)
        if relevant:
            kept.append(replace(question, relevant=relevant))
    return kept
