from __future__ import annotations

import itertools
import random
import re

import pytest

from runtime_ops.demo import CORPUS_DIR, corpus_keys
from runtime_ops.documents.chunking import chunk_text
from runtime_ops.documents.parsing import parse_document


def _document(seed: int, paragraphs: int = 40) -> str:
    """Prose with unique, numbered words so overlaps can be measured exactly."""
    rng = random.Random(seed)
    counter = 0
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(rng.randint(1, 12)):
            words = []
            for _ in range(rng.randint(3, 25)):
                words.append(f"w{counter:05d}")
                counter += 1
            sentences.append(" ".join(words) + rng.choice([".", "!", "?"]))
        joiner = rng.choice([" ", "\n"])  # some paragraphs are line-broken text (lists, code, reference)
        out.append(joiner.join(sentences))
    return "\n\n".join(out)


def _check_invariants(text: str, chunks: list[str], max_chars: int, overlap: int) -> None:
    assert chunks, "non-empty text must give at least one chunk"
    for chunk in chunks:
        # Only a chunk starting inside a long code block may start with whitespace: that line's indentation.
        assert chunk and chunk == chunk.rstrip() and chunk.lstrip(" \t") == chunk.lstrip()
        assert len(chunk) <= max_chars
    # Walk the chunks: each starts with a word-aligned tail (<= overlap chars) of the previous one,
    # and once that shared context is removed the chunks give back the original words in order.
    words: list[str] = chunks[0].split()
    for previous, current in itertools.pairwise(chunks):
        shared = _shared_prefix(previous, current)
        assert len(shared) <= overlap
        if shared:
            start = len(previous) - len(shared)
            assert previous[start - 1].isspace(), "overlap must start on a word boundary"
            assert len(shared) < len(previous), "overlap must be partial context, not a repeat"
        words += current[len(shared) :].split()
    assert words == text.split()


def _shared_prefix(previous: str, current: str) -> str:
    """The longest suffix of `previous` that `current` starts with (numbered words make it unambiguous). Shared
    context never holds code, so a chunk ending with a closing fence and the next starting with an opening one (two
    code blocks in a row, as HTML pages have) share nothing; and it ends at a separator, so a chunk ending with
    `name` and the next starting with `name(args)` share nothing either."""
    for start in range(1, len(previous)):
        tail = previous[start:]
        if not current.startswith(tail) or not previous[start - 1].isspace() or tail.startswith(("```", "~~~")):
            continue
        if len(current) == len(tail) or current[len(tail)].isspace():
            return tail
    return ""


@pytest.mark.parametrize(("max_chars", "overlap"), [(1200, 150), (400, 60), (120, 0), (60, 59), (30, 10)])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_size_and_overlap_invariants(seed: int, max_chars: int, overlap: int) -> None:
    text = _document(seed)
    chunks = chunk_text(text, max_chars=max_chars, overlap=overlap)
    _check_invariants(text, chunks, max_chars, overlap)


def test_overlap_is_actually_used() -> None:
    text = _document(7)
    chunks = chunk_text(text, max_chars=500, overlap=100)
    shared = [_shared_prefix(a, b) for a, b in itertools.pairwise(chunks)]
    assert sum(1 for s in shared if s) >= len(shared) * 0.8
    assert max(len(s) for s in shared) > 50


def test_zero_overlap_shares_nothing() -> None:
    text = _document(8)
    chunks = chunk_text(text, max_chars=300, overlap=0)
    assert all(not _shared_prefix(a, b) for a, b in itertools.pairwise(chunks))
    _check_invariants(text, chunks, 300, 0)


def test_short_text_is_one_chunk_and_whitespace_is_none() -> None:
    assert chunk_text("  Hello world.\n\nSecond paragraph.  ") == ["Hello world.\n\nSecond paragraph."]
    assert chunk_text("") == []
    assert chunk_text(" \n\n\t ") == []


def test_breaks_at_paragraph_boundaries_when_paragraphs_fit() -> None:
    paragraphs = [f"Paragraph {i} " + "filler " * 20 + "end." for i in range(12)]
    chunks = chunk_text("\n\n".join(paragraphs), max_chars=400, overlap=0)
    assert len(chunks) > 1
    for chunk in chunks:
        assert all(part in paragraphs for part in chunk.split("\n\n")), "a paragraph was cut in the middle"


def test_long_paragraph_breaks_at_sentence_ends() -> None:
    sentences = [f"Sentence number {i} says something moderately interesting." for i in range(40)]
    chunks = chunk_text(" ".join(sentences), max_chars=200, overlap=0)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.endswith("."), chunk
        assert re.match(r"^Sentence number \d+", chunk), chunk


def test_line_breaks_inside_a_long_paragraph_are_kept() -> None:
    lines = [f"item {i}: value" for i in range(100)]
    chunks = chunk_text("\n".join(lines), max_chars=120, overlap=0)
    for chunk in chunks:
        assert all(line in lines for line in chunk.split("\n"))


def test_monster_tokens_are_hard_split() -> None:
    token = "".join(chr(ord("a") + i % 26) for i in range(2500))
    chunks = chunk_text(f"Before the blob.\n\n{token}\n\nAfter the blob.", max_chars=1000, overlap=100)
    # Full-size slices leave no room for shared context; the slices concatenate back to the token.
    assert chunks == ["Before the blob.", token[:1000], token[1000:2000], token[2000:] + "\n\nAfter the blob."]


def test_deterministic() -> None:
    text = _document(11)
    assert chunk_text(text, max_chars=333, overlap=44) == chunk_text(text, max_chars=333, overlap=44)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_chars": 0}, "max_chars must be at least 1, got 0"),
        ({"overlap": -1}, "overlap must not be negative, got -1"),
        ({"max_chars": 100, "overlap": 100}, r"overlap \(100\) must be smaller than max_chars \(100\)"),
        ({"max_chars": 100, "overlap": 250}, r"overlap \(250\) must be smaller than max_chars \(100\)"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        chunk_text("text", **kwargs)


def test_every_shipped_document_chunks_within_bounds() -> None:
    for key in corpus_keys():
        text = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 * 1024 * 1024).text
        chunks = chunk_text(text)
        _check_invariants(text, chunks, 1200, 150)


# -- markdown code ------------------------------------------------------------------------------------------

_BLOCK = (
    "```bash\n"
    "# pretty-print, then keep the first field\n"
    'echo \'{"json":"obj"}\' | python -m json.tool\n'
    "\n"
    "    indented: cut -d '|' -f 1 <file>\n"
    "```"
)


def _prose(n: int, tag: str) -> str:
    return " ".join(f"{tag} sentence {i} tells a little more about the topic." for i in range(n))


def test_a_fenced_block_that_fits_is_never_split_and_keeps_its_characters() -> None:
    text = "\n\n".join([_prose(4, "before"), _BLOCK, _prose(4, "after")])
    for max_chars, overlap in [(len(_BLOCK), 0), (300, 60), (400, 150), (1200, 150)]:
        chunks = chunk_text(text, max_chars=max_chars, overlap=overlap)
        holding = [c for c in chunks if "```" in c]
        assert len(holding) == 1 and _BLOCK in holding[0], (max_chars, chunks)
        _check_invariants(text, chunks, max_chars, overlap)


def test_shared_context_never_starts_inside_a_code_block() -> None:
    text = "\n\n".join([_prose(2, "before"), _BLOCK, _prose(6, "after")])
    chunks = chunk_text(text, max_chars=len(_BLOCK) + 120, overlap=100)
    after = chunks[chunks.index(next(c for c in chunks if _BLOCK in c)) + 1]
    assert "```" not in after and "json.tool" not in after
    assert after.startswith("after sentence 0")


def test_a_longer_block_breaks_between_its_lines() -> None:
    lines = [f"    step_{i}() | tee log_{i}.txt" for i in range(40)]
    block = "```sh\n" + "\n".join(lines) + "\n```"
    chunks = chunk_text(f"Intro.\n\n{block}\n\nOutro.", max_chars=300, overlap=50)
    assert len(chunks) > 3
    pieces = "\n".join(chunks)
    for line in lines[1:]:
        assert line in pieces.split("\n"), "a line of code was cut or changed"
    _check_invariants(f"Intro.\n\n{block}\n\nOutro.", chunks, 300, 50)


def test_inline_code_is_never_cut_at_a_sentence_or_word_break() -> None:
    span = "`cd build. make all. make install`"
    text = " ".join(f"Step {i} runs {span} to finish." for i in range(20))
    for chunk in chunk_text(text, max_chars=150, overlap=0):
        assert chunk.count("`") % 2 == 0, chunk


def test_every_shipped_markdown_document_keeps_its_blocks_whole() -> None:
    from runtime_ops.markdown import split_fenced

    for key in corpus_keys():
        if not key.endswith(".md"):
            continue
        text = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 * 1024 * 1024).text
        chunks = chunk_text(text)
        for block in split_fenced(text):
            code = block.text.strip()
            if block.code and len(code) <= 1200:
                assert any(code in chunk for chunk in chunks), (key, code[:80])
