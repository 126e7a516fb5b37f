"""Putting text into markdown without changing it, and finding its code (pure, no Dagster).

Run metadata, evaluation reports and answers are markdown that the Dagster UI renders (CommonMark with GFM
tables; raw HTML is dropped, so `<br>` is no way out). Text put into them is escaped, never rewritten: a `|`
in a shell command has to reach the reader as `|`, not as a look-alike `/` that changes the command.

- `escape_text`: plain text as inline markdown that renders as exactly its characters;
- `table_cell` / `table_row`: markdown made safe for GFM table cells;
- `code_span`: any text as an inline code span;
- `split_fenced` / `inline_code_spans` / `starts_inside_code`: where fenced code blocks and code spans are, for
  the chunker and the extractive answerer, which must not cut through them or read them as prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# What starts inline syntax: escapes, code spans, emphasis, links and images, autolinks and HTML, entity
# references, GFM table cells and strikethrough. CommonMark lets any ASCII punctuation be backslash-escaped,
# but escaping only these keeps the source readable where the UI shows it raw.
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~])")
_LINE_BREAKS = re.compile(r"[^\S\n]*\n\s*")
_UNESCAPED_PIPE = re.compile(r"(?<!\\)((?:\\\\)*)\|")
_BLOCK_START = re.compile(r"^(\d{0,9})([-+#=]|(?<=\d)[.)])")

# A fence is three or more backticks or tildes; a backtick fence's info string may not hold a backtick. Any
# indentation is accepted: fences nested in list items are indented past CommonMark's three spaces, and a
# block cut in two is worse than a rare four-space-indented line of backticks read as a fence.
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}(?=[^`]*$)|~{3,})(?P<info>.*?)\s*$")
_CODE_SPAN = re.compile(r"(?<!`)(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`)", re.DOTALL)


def escape_text(text: str) -> str:
    """Plain `text` as one line of inline markdown that renders as the same characters.

    Line breaks become single spaces: inside a paragraph a renderer shows a line break as a space anyway, and in
    a heading, list item or table cell a raw one would end the element.
    """
    escaped = _INLINE_SPECIAL.sub(r"\\\1", _LINE_BREAKS.sub(" ", text.strip()))
    # A list item's or a quote's text is parsed as blocks: a leading "1." or "-" would open a nested list.
    return _BLOCK_START.sub(r"\1\\\2", escaped)


def table_cell(markdown: str) -> str:
    """Inline `markdown` (code spans, emphasis kept) made safe for one GFM table cell.

    GFM splits a row at every unescaped `|`, before it parses code spans, and takes `\\|` as a literal pipe even
    inside a code span; a line break would end the row, and a renderer shows it as a space anyway.
    """
    text = _LINE_BREAKS.sub(" ", markdown.strip())
    spans = inline_code_spans(text)
    out: list[str] = []
    position = 0
    for start, end in [*spans, (len(text), len(text))]:
        # Outside code a `\|` is already escaped; inside, a backslash is literal, so every pipe needs its own.
        out.append(_UNESCAPED_PIPE.sub(r"\1\\|", text[position:start]))
        out.append(text[start:end].replace("|", "\\|"))
        position = end
    return "".join(out)


def table_row(cells: Iterable[str]) -> str:
    """One GFM table row of inline-markdown `cells` (see `table_cell`)."""
    return "| " + " | ".join(table_cell(cell) for cell in cells) + " |"


def code_span(text: str) -> str:
    """`text` as an inline code span, whatever backticks it holds (rendered verbatim, line breaks as spaces)."""
    text = _LINE_BREAKS.sub(" ", text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    # A span whose text starts or ends with a backtick needs a space of padding, which the renderer strips; it
    # strips one space from each end of a text with a space at both, so such a text is padded too.
    spaced = text[:1] == text[-1:] == " " and bool(text.strip())
    pad = " " if text.startswith("`") or text.endswith("`") or spaced else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


@dataclass(frozen=True)
class Block:
    """A run of lines of a markdown text: prose, or a fenced code block with its fence lines."""

    text: str
    code: bool = False
    fence: str = ""  # the opening fence (e.g. "```"), for a code block
    opened: bool = True  # False: the text starts after the code block's opening fence (`inside`)
    closed: bool = True  # False: the text ends before the code block's closing fence


def fence_line(line: str) -> tuple[str, str] | None:
    """(fence, info string) if `line` is a code fence line, else None."""
    match = _FENCE.match(line)
    return (match.group("fence"), match.group("info")) if match else None


def split_fenced(text: str, *, inside: str | None = None) -> list[Block]:
    """`text` as prose and fenced code blocks, in order; concatenated, the blocks' texts give `text` back.

    `inside` is the fence of a code block the text starts in (a piece cut from the middle of a document): its
    lines up to the closing fence are that block's code. A block left open at the end runs to the end of the
    text, as CommonMark reads it.
    """
    blocks: list[Block] = []
    lines: list[str] = []
    fence = inside
    opened = inside is None
    for line in text.splitlines(keepends=True):
        found = fence_line(line)
        if fence is None:
            if found is not None:
                if lines:
                    blocks.append(Block("".join(lines)))
                lines, fence = [line], found[0]
            else:
                lines.append(line)
            continue
        lines.append(line)
        if found is not None and not found[1] and found[0][0] == fence[0] and len(found[0]) >= len(fence):
            blocks.append(Block("".join(lines), code=True, fence=fence, opened=opened))
            lines, fence, opened = [], None, True
    if lines:
        code = fence is not None
        blocks.append(Block("".join(lines), code=code, fence=fence or "", opened=opened, closed=not code))
    return blocks


def close_fences(markdown: str) -> str:
    """`markdown` with a code block it leaves open closed, so that it cannot swallow what follows it."""
    blocks = split_fenced(markdown)
    if blocks and not blocks[-1].closed:
        return markdown.rstrip("\n") + "\n" + blocks[-1].fence
    return markdown


def inline_code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each inline code span of `text`, backticks included."""
    return [match.span() for match in _CODE_SPAN.finditer(text)]


def outside_spans(position: int, spans: list[tuple[int, int]]) -> bool:
    """Whether `position` of a text lies outside all of its `spans` (from `inline_code_spans`)."""
    return not any(start < position < end for start, end in spans)


def starts_inside_code(text: str) -> str | None:
    """The fence of a code block `text` starts in (a chunk cut from inside a long block), else None.

    Told by its fence lines: an odd number of them, the first bare (no info string, as a closing fence is), means
    the first one closes a block opened before the text; an opening fence usually names its language.
    """
    fences = [found for line in text.splitlines() if (found := fence_line(line)) is not None]
    if len(fences) % 2 == 1 and not fences[0][1]:
        return fences[0][0]
    return None
