"""Split document text into overlapping chunks for embedding and retrieval.

Length is measured by a counting function passed in: the embedder's own tokenizer (special tokens included), an
estimate for a model whose tokenizer is not at hand, or characters. Every chunk counts at most `max_tokens`,
shared context included, so no word of it lies past the window the model reads.

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
from collections.abc import Callable
from typing import NamedTuple

from runtime_ops.markdown import inline_code_spans, outside_spans, split_fenced

# How long a text is for the model: tokens, or characters (`len`).
Count = Callable[[str], int]

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
    _check_limits("max_chars", max_chars, "overlap", overlap)
    return _chunk(text, len, max_chars, overlap)


def chunk_tokens(text: str, *, count: Count, max_tokens: int, overlap_tokens: int) -> list[str]:
    """Return chunks for which `count` gives at most `max_tokens`; consecutive chunks share a word-aligned tail of
    the previous one that counts at most `overlap_tokens`, shortened (or dropped) whenever keeping it would push a
    chunk over `max_tokens`. `count` measures a whole text as the model reads it (special tokens included), so
    the limit holds for every chunk as it is embedded, shared context included. Same boundaries as `chunk_text`.
    """
    _check_limits("max_tokens", max_tokens, "overlap_tokens", overlap_tokens)
    return _chunk(text, count, max_tokens, overlap_tokens)


def _check_limits(limit_name: str, limit: int, overlap_name: str, overlap: int) -> None:
    if limit < 1:
        raise ValueError(f"{limit_name} must be at least 1, got {limit}")
    if overlap < 0:
        raise ValueError(f"{overlap_name} must not be negative, got {overlap}")
    if overlap >= limit:
        raise ValueError(
            f"{overlap_name} ({overlap}) must be smaller than {limit_name} ({limit}), "
            "otherwise a chunk could hold nothing but repeated context"
        )


def _chunk(text: str, count: Count, limit: int, overlap: int) -> list[str]:
    def fits(s: str) -> bool:
        return count(s) <= limit

    chunks: list[str] = []
    current = ""
    code_end = 0  # where the last code piece of `current` ends: shared context starts after it
    for separator, piece, code in _pieces(text, fits):
        if not current:
            current, code_end = piece, 0
        elif fits(current + separator + piece):
            current += separator + piece
        else:
            chunks.append(current.rstrip())

            def shareable(tail: str, separator: str = separator, piece: str = piece) -> bool:
                return count(tail) <= overlap and fits(tail + separator + piece)

            tail = _tail(current, shareable, code_end)
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


Fits = Callable[[str], bool]


def _pieces(text: str, fits: Fits) -> list[_Piece]:
    """Units that each fit a chunk, each with the separator that joins it to the previous unit."""
    pieces: list[_Piece] = []
    for block in split_fenced(text.replace("\r\n", "\n").replace("\r", "\n")):
        if block.code:
            pieces += _code_pieces(block.text, fits)
        else:
            pieces += _prose_pieces(block.text, fits)
    return pieces


def _code_pieces(block: str, fits: Fits) -> list[_Piece]:
    """A fenced block as one piece when it fits, else one piece per line; blank lines ride in the separators."""
    block = block.strip("\n").rstrip()
    if fits(block):
        return [_Piece("\n\n", block, True)]
    pieces: list[_Piece] = []
    separator = "\n\n"
    for line in block.split("\n"):
        if not line.strip():
            separator += "\n"
            continue
        for i, part in enumerate(_slices(line, fits)):
            pieces.append(_Piece(separator if i == 0 else "", part, True))
        separator = "\n"
    return pieces


def _prose_pieces(text: str, fits: Fits) -> list[_Piece]:
    pieces: list[_Piece] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if fits(paragraph):
            pieces.append(_Piece("\n\n", paragraph))
            continue
        first = True
        for separator, sentence in _split_keeping_separators(paragraph, _SENTENCE_BREAK):
            separator = "\n\n" if first else separator
            first = False
            if fits(sentence):
                pieces.append(_Piece(separator, sentence))
                continue
            for word_separator, word in _split_keeping_separators(sentence, _WORD_BREAK):
                # The first word inherits the sentence's own separator; the rest keep the gap they had.
                word_separator = word_separator or separator
                # Only a single token longer than a whole chunk gets here: cut it into full-size slices,
                # joined with "" so that concatenating the slices gives the token back.
                for i, part in enumerate(_slices(word, fits)):
                    pieces.append(_Piece(word_separator if i == 0 else "", part))
    return pieces


def _slices(word: str, fits: Fits) -> list[str]:
    """`word` as consecutive slices, each the longest prefix of the rest that fits (one slice when it fits)."""
    if fits(word):
        return [word]
    slices: list[str] = []
    rest = word
    while rest:
        # The longest fitting prefix, by bisection: a longer prefix never counts fewer tokens.
        low, high = 0, len(rest)
        while low < high:
            middle = (low + high + 1) // 2
            if fits(rest[:middle]):
                low = middle
            else:
                high = middle - 1
        if low == 0:
            raise ValueError(f"the chunk limit cannot hold even the single character {rest[0]!r}; raise it")
        slices.append(rest[:low])
        rest = rest[low:]
    return slices


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


def _tail(chunk: str, shareable: Fits, start: int = 0) -> str:
    """The longest suffix of `chunk` from `start` on that starts at the beginning of a word and is `shareable`
    (never the whole chunk: shared context is genuinely partial)."""
    starts = [i for i in range(max(1, start), len(chunk)) if chunk[i - 1].isspace() and not chunk[i].isspace()]
    # Bisection over the word starts, longest suffix first: a shorter suffix never counts more tokens.
    low, high = 0, len(starts)
    while low < high:
        middle = (low + high) // 2
        if shareable(chunk[starts[middle] :]):
            high = middle
        else:
            low = middle + 1
    return chunk[starts[low] :] if low < len(starts) else ""
