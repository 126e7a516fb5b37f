"""Split document text into overlapping chunks for embedding and retrieval.

Chunks break at the most natural boundary that fits: paragraphs, then sentences (or line breaks), then
words, and only a single "word" longer than a whole chunk (a URL, base64, a minified line) is cut blindly.
A fenced code block that fits a chunk is one unit, kept whole and as it was (blank lines and indentation
included); a longer one breaks between its lines. Sentences and words never break inside inline code.
Each chunk repeats a little of the previous one so that a fact straddling a boundary is still retrievable
from one chunk; that shared context never starts inside a code block, where it would begin with half a block
and a stray closing fence. The output depends only on the input, so re-chunking unchanged text yields
identical chunks (and identical chunk ids downstream).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from runtime_ops.markdown import inline_code_spans, outside_spans, split_fenced

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# A sentence ends at . ! or ? followed by whitespace; a line break inside a paragraph is as good a place
# to cut (lists, code, reference text), so it counts as a boundary too.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_WORD_BREAK = re.compile(r"\s+")


def chunk_text(text: str, *, max_chars: int = 1200, overlap: int = 150) -> list[str]:
    """Return chunks of at most `max_chars` characters; consecutive chunks share up to `overlap` chars.

    The shared context is the tail of the previous chunk starting at a word boundary, and it is shortened
    (or dropped) whenever keeping it would push a chunk over `max_chars`. Whitespace-only text gives [].
    A chunk starts with a word, or with the indentation of the line of code it starts with.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if overlap < 0:
        raise ValueError(f"overlap must not be negative, got {overlap}")
    if overlap >= max_chars:
        raise ValueError(
            f"overlap ({overlap}) must be smaller than max_chars ({max_chars}), "
            "otherwise a chunk could hold nothing but repeated context"
        )

    chunks: list[str] = []
    current = ""
    code_end = 0  # where the last code piece of `current` ends: shared context starts after it
    for separator, piece, code in _pieces(text, max_chars):
        if not current:
            current, code_end = piece, 0
        elif len(current) + len(separator) + len(piece) <= max_chars:
            current += separator + piece
        else:
            chunks.append(current.rstrip())
            tail = _tail(current, min(overlap, max_chars - len(separator) - len(piece)), code_end)
            current, code_end = (tail + separator + piece if tail else piece), 0
        if code:
            code_end = len(current)
    if current:
        chunks.append(current.rstrip())
    return chunks


class _Piece(NamedTuple):
    separator: str  # what joins it to the previous piece
    text: str
    code: bool = False


def _pieces(text: str, max_chars: int) -> list[_Piece]:
    """Units no longer than `max_chars`, each with the separator that joins it to the previous unit."""
    pieces: list[_Piece] = []
    for block in split_fenced(text.replace("\r\n", "\n").replace("\r", "\n")):
        if block.code:
            pieces += _code_pieces(block.text, max_chars)
        else:
            pieces += _prose_pieces(block.text, max_chars)
    return pieces


def _code_pieces(block: str, max_chars: int) -> list[_Piece]:
    """A fenced block as one piece when it fits, else one piece per line; blank lines ride in the separators."""
    block = block.strip("\n").rstrip()
    if len(block) <= max_chars:
        return [_Piece("\n\n", block, True)]
    pieces: list[_Piece] = []
    separator = "\n\n"
    for line in block.split("\n"):
        if not line.strip():
            separator += "\n"
            continue
        for start in range(0, len(line), max_chars):
            pieces.append(_Piece(separator if start == 0 else "", line[start : start + max_chars], True))
        separator = "\n"
    return pieces


def _prose_pieces(text: str, max_chars: int) -> list[_Piece]:
    pieces: list[_Piece] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= max_chars:
            pieces.append(_Piece("\n\n", paragraph))
            continue
        first = True
        for separator, sentence in _split_keeping_separators(paragraph, _SENTENCE_BREAK):
            separator = "\n\n" if first else separator
            first = False
            if len(sentence) <= max_chars:
                pieces.append(_Piece(separator, sentence))
                continue
            for word_separator, word in _split_keeping_separators(sentence, _WORD_BREAK):
                # The first word inherits the sentence's own separator; the rest keep the gap they had.
                word_separator = word_separator or separator
                # Only a single token longer than a whole chunk gets here: cut it into full-size slices,
                # joined with "" so that concatenating the slices gives the token back.
                for start in range(0, len(word), max_chars):
                    pieces.append(_Piece(word_separator if start == 0 else "", word[start : start + max_chars]))
    return pieces


def _split_keeping_separators(text: str, pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """Split `text` on `pattern` outside inline code; each part but the first carries "\\n" or " ", as its
    original gap held."""
    parts: list[tuple[str, str]] = []
    separator = ""
    position = 0
    spans = inline_code_spans(text) if "`" in text else []
    for match in pattern.finditer(text):
        if not outside_spans(match.start(), spans) or not outside_spans(match.end() - 1, spans):
            continue
        part = text[position : match.start()].strip()
        if part:
            parts.append((separator, part))
        separator = "\n" if "\n" in match.group(0) else " "
        position = match.end()
    tail = text[position:].strip()
    if tail:
        parts.append((separator, tail))
    return parts


def _tail(chunk: str, limit: int, start: int = 0) -> str:
    """The longest suffix of `chunk` of at most `limit` chars, from `start` on, that starts at the beginning of
    a word."""
    if limit <= 0:
        return ""
    # Never the whole chunk: starting at index 1 or later means the tail is genuinely partial context.
    for i in range(max(1, len(chunk) - limit, start), len(chunk)):
        if chunk[i - 1].isspace() and not chunk[i].isspace():
            return chunk[i:]
    return ""
