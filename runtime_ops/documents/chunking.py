"""Split document text into overlapping chunks for embedding and retrieval.

Chunks break at the most natural boundary that fits: paragraphs, then sentences (or line breaks), then
words, and only a single "word" longer than a whole chunk (a URL, base64, a minified line) is cut blindly.
Each chunk repeats a little of the previous one so that a fact straddling a boundary is still retrievable
from one chunk. The output depends only on the input, so re-chunking unchanged text yields identical
chunks (and identical chunk ids downstream).
"""

from __future__ import annotations

import re

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# A sentence ends at . ! or ? followed by whitespace; a line break inside a paragraph is as good a place
# to cut (lists, code, reference text), so it counts as a boundary too.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_WORD_BREAK = re.compile(r"\s+")


def chunk_text(text: str, *, max_chars: int = 1200, overlap: int = 150) -> list[str]:
    """Return chunks of at most `max_chars` characters; consecutive chunks share up to `overlap` chars.

    The shared context is the tail of the previous chunk starting at a word boundary, and it is shortened
    (or dropped) whenever keeping it would push a chunk over `max_chars`. Whitespace-only text gives [].
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
    for separator, piece in _pieces(text, max_chars):
        if not current:
            current = piece
        elif len(current) + len(separator) + len(piece) <= max_chars:
            current += separator + piece
        else:
            chunks.append(current)
            tail = _tail(current, min(overlap, max_chars - len(separator) - len(piece)))
            current = tail + separator + piece if tail else piece
    if current:
        chunks.append(current)
    return chunks


def _pieces(text: str, max_chars: int) -> list[tuple[str, str]]:
    """Units no longer than `max_chars`, each with the separator that joins it to the previous unit."""
    pieces: list[tuple[str, str]] = []
    for paragraph in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= max_chars:
            pieces.append(("\n\n", paragraph))
            continue
        first = True
        for separator, sentence in _split_keeping_separators(paragraph, _SENTENCE_BREAK):
            separator = "\n\n" if first else separator
            first = False
            if len(sentence) <= max_chars:
                pieces.append((separator, sentence))
                continue
            for word_separator, word in _split_keeping_separators(sentence, _WORD_BREAK):
                # The first word inherits the sentence's own separator; the rest keep the gap they had.
                word_separator = word_separator or separator
                # Only a single token longer than a whole chunk gets here: cut it into full-size slices,
                # joined with "" so that concatenating the slices gives the token back.
                for start in range(0, len(word), max_chars):
                    pieces.append((word_separator if start == 0 else "", word[start : start + max_chars]))
    return pieces


def _split_keeping_separators(text: str, pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """Split `text` on `pattern`; each part but the first carries "\\n" or " ", as its original gap held."""
    parts: list[tuple[str, str]] = []
    separator = ""
    position = 0
    for match in pattern.finditer(text):
        part = text[position : match.start()].strip()
        if part:
            parts.append((separator, part))
        separator = "\n" if "\n" in match.group(0) else " "
        position = match.end()
    tail = text[position:].strip()
    if tail:
        parts.append((separator, tail))
    return parts


def _tail(chunk: str, limit: int) -> str:
    """The longest suffix of `chunk` of at most `limit` chars that starts at the beginning of a word."""
    if limit <= 0:
        return ""
    # Never the whole chunk: starting at index 1 or later means the tail is genuinely partial context.
    for i in range(max(1, len(chunk) - limit), len(chunk)):
        if chunk[i - 1].isspace() and not chunk[i].isspace():
            return chunk[i:]
    return ""
