"""Answers from retrieved chunks: `answer_hits` (what `/api/answer` and `rag_answers` call) merges the chunks into
passages (`runtime_ops.serving.passages`: overlapping chunks of a document become one passage, cited once), then
asks the model endpoint, or answers extractively: the parts of the passages closest to the question.

The passages are markdown, and so is an answer. A part is a prose sentence, or a fenced code block kept whole
with its fences (a block a chunk holds only part of is closed, its code untouched): a command must reach the
reader as it was written, not as a lone fence line glued to a sentence. Heading markers are dropped, their text
kept: `### Title` in the middle of an answer is debris, not structure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_ops.http import EndpointError
from runtime_ops.markdown import close_fences, inline_code_spans, outside_spans, split_fenced, starts_inside_code
from runtime_ops.serving.passages import Passage, Retrieved, merge_passages

_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|$)(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
# Shorter prose is a fragment (a label, a stray word) that reads as noise in an answer.
_MIN_SENTENCE = 20


@dataclass(frozen=True)
class _Part:
    text: str
    code: bool = False
    paragraph: int = 0  # sentences of one paragraph share it, and run on in an answer


def split_sentences(text: str) -> list[str]:
    """The prose sentences of markdown `text` (code blocks left out), heading markers dropped."""
    return [p.text for p in _parts(text) if not p.code]


def _parts(passage: str, first_paragraph: int = 0) -> list[_Part]:
    """The answer candidates of `passage`; paragraphs are numbered from `first_paragraph`."""
    parts: list[_Part] = []
    paragraph = first_paragraph
    for block in split_fenced(passage, inside=starts_inside_code(passage)):
        if block.code:
            code = block.text.strip("\n").rstrip()
            if not block.opened:
                code = block.fence + "\n" + code
            if not block.closed:
                code += "\n" + block.fence
            if any(line.strip() for line in code.split("\n")[1:-1]):  # fence lines alone are no answer
                parts.append(_Part(code, code=True, paragraph=paragraph))
            paragraph += 1
            continue
        # A heading's text is a paragraph of its own, not the start of the sentence under it.
        for text in _PARAGRAPH.split(_HEADING.sub(lambda m: m.group("text") + "\n", block.text)):
            spans = inline_code_spans(text) if "`" in text else []
            position = 0
            for match in _SENTENCE.finditer(text):
                if outside_spans(match.start(), spans):
                    parts.append(_Part(text[position : match.start()].strip(), paragraph=paragraph))
                    position = match.end()
            parts.append(_Part(text[position:].strip(), paragraph=paragraph))
            paragraph += 1
    return [p for p in parts if p.code or len(p.text) >= _MIN_SENTENCE]


def extractive_answer(
    question_vec: np.ndarray,
    passages: Sequence[str],
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    max_sentences: int = 3,
    max_chars: int = 600,
) -> str:
    """The parts most similar to the question, in their original order for readability, as markdown."""
    parts: list[_Part] = []
    for p in passages:
        parts.extend(_parts(p, first_paragraph=parts[-1].paragraph + 1 if parts else 0))
    # The same sentence or code block in two passages (boilerplate two documents share) is said once.
    first: dict[str, _Part] = {}
    for part in parts:
        first.setdefault(part.text, part)
    parts = list(first.values())
    if not parts:
        return _clip(_Part(_HEADING.sub(lambda m: m.group("text"), passages[0]).strip()), max_chars) if passages else ""
    scores = embed([p.text for p in parts]) @ question_vec
    ranked = np.argsort(-scores)[:max_sentences].tolist()
    # The weakest parts give way until the answer fits; a code block is never cut to make room for prose.
    while len(ranked) > 1 and len(_join([parts[i] for i in sorted(ranked)])) > max_chars:
        ranked.pop()
    chosen = [parts[i] for i in sorted(ranked)]
    if len(chosen) == 1:
        return _clip(chosen[0], max_chars)
    return _join(chosen)


def _join(parts: Sequence[_Part]) -> str:
    """Sentences of one paragraph run on; each paragraph, heading text and code block stands on its own."""
    text = ""
    for i, part in enumerate(parts):
        if i == 0:
            text = part.text
        elif part.paragraph == parts[i - 1].paragraph and not part.code:
            text += " " + part.text
        else:
            text += "\n\n" + part.text
    return text


def _clip(part: _Part, max_chars: int) -> str:
    """`part` within `max_chars`: prose cut with an ellipsis; code cut between lines and its block closed (the
    ellipsis after it, never inside the code)."""
    if len(part.text) <= max_chars:
        return part.text
    if not part.code:
        return close_fences(part.text[: max_chars - 1].rstrip() + "…")
    lines = part.text.split("\n")
    fence = lines[-1]
    kept = lines[:2]
    for line in lines[2:-1]:
        if len("\n".join([*kept, line, fence])) + 2 > max_chars:
            break
        kept.append(line)
    return "\n".join([*kept, fence]) + "\n\n…"


def answer_with(
    llm: Any,
    question: str,
    question_vec: np.ndarray,
    passages: Sequence[str],
    embed: Callable[[Sequence[str]], np.ndarray],
) -> tuple[str, str, str | None]:
    """(answer, answerer, endpoint error): the chat endpoint's answer when there is one (`llm`, a ChatEndpoint),
    else, or when it still fails after its retries, the extractive answer and the failure's message."""
    if llm is not None and passages:
        try:
            return llm.answer(question, list(passages)), "model", None
        except EndpointError as exc:
            return extractive_answer(question_vec, passages, embed), "extractive", str(exc)
    return extractive_answer(question_vec, passages, embed), "extractive", None


@dataclass(frozen=True)
class Answer:
    text: str
    answerer: str  # "model" or "extractive"
    endpoint_error: str | None  # why the model endpoint's answer was not used, when it failed
    passages: list[Passage]  # what the answer was drawn from, in the order the model prompt numbers them

    def sources(self) -> list[dict[str, Any]]:
        """One citation per passage: `sources[i]` is the prompt's passage [i + 1]."""
        return [p.as_source() for p in self.passages]


def answer_hits(
    llm: Any,
    question: str,
    question_vec: np.ndarray,
    hits: Sequence[Retrieved],
    embed: Callable[[Sequence[str]], np.ndarray],
) -> Answer:
    """The answer to `question` from a search's `hits` (best first), merged into passages first so that no passage
    is given twice to the model or to the extractive answer."""
    passages = merge_passages(hits)
    text, answerer, failure = answer_with(llm, question, question_vec, [p.text for p in passages], embed)
    return Answer(text, answerer, failure, passages)
