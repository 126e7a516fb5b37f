"""Extractive answers: the sentences of the retrieved chunks closest to the question (no model endpoint)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) >= 20]


def extractive_answer(
    question_vec: np.ndarray,
    passages: Sequence[str],
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    max_sentences: int = 3,
    max_chars: int = 600,
) -> str:
    """Pick the sentences most similar to the question, keeping their original order for readability."""
    sentences: list[str] = []
    for p in passages:
        sentences.extend(split_sentences(p))
    if not sentences:
        return passages[0][:max_chars] if passages else ""
    scores = embed(sentences) @ question_vec
    best = sorted(np.argsort(-scores)[:max_sentences].tolist())
    answer = " ".join(sentences[i] for i in best)
    return answer if len(answer) <= max_chars else answer[: max_chars - 1].rstrip() + "…"


def answer_with(
    llm: Any,
    question: str,
    question_vec: np.ndarray,
    passages: Sequence[str],
    embed: Callable[[Sequence[str]], np.ndarray],
) -> tuple[str, str, str | None]:
    """(answer, answerer, endpoint error): the chat endpoint's answer when there is one (`llm`, a ChatEndpoint),
    else, or when it still fails after its retries, the extractive answer and the failure's message."""
    from runtime_ops.http import EndpointError

    if llm is not None and passages:
        try:
            return llm.answer(question, list(passages)), "model", None
        except EndpointError as exc:
            return extractive_answer(question_vec, passages, embed), "extractive", str(exc)
    return extractive_answer(question_vec, passages, embed), "extractive", None
