"""runtime_ops.markdown: text put into markdown renders as the same characters (checked with a CommonMark
renderer with GFM tables, the kind the Dagster UI uses), and fenced code blocks are found as CommonMark reads them."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from runtime_ops.markdown import (
    Block,
    close_fences,
    code_span,
    escape_text,
    inline_code_spans,
    split_fenced,
    table_cell,
    table_row,
)
from runtime_ops_tests.support.rendered import shown

RENDERER = MarkdownIt("commonmark").enable("table")

TRICKY = [
    'echo \'{"json":"obj"}\' | python -m json.tool',
    "a|b and a \\| b and a \\\\| b",
    "`a|b` is not code here, nor *this* or _that_ or ~~that~~",
    "[not a link](http://example.com) <b>not html</b> &amp; not an entity",
    "1. not a list",
    "- not a list either",
    "# not a heading",
    "> not a quote",
    "C:\\path\\to\\file_name.txt",
]


def _shown(html: str) -> str:
    return shown(html).strip()


@pytest.mark.parametrize("text", TRICKY)
def test_escaped_text_renders_as_its_characters(text: str) -> None:
    for context in ("{}", "- {}", "### {}", "**Q:** {}"):
        assert _shown(RENDERER.render(context.format(escape_text(text)))).removeprefix("Q: ") == text, context


def test_escaped_text_is_one_line() -> None:
    assert escape_text("  first line\n  second | line  ") == "first line second \\| line"


@pytest.mark.parametrize("text", TRICKY)
def test_table_cells_keep_pipes_as_pipes(text: str) -> None:
    row = table_row([escape_text(text), code_span(text), "plain"])
    tokens = RENDERER.parse(f"| a | b | c |\n|---|---|---|\n{row}\n")
    cells = [t for t in tokens if t.type == "inline"][3:]
    assert len(cells) == 3, row
    shown = [_shown(RENDERER.renderInline(c.content)) for c in cells]
    assert shown == [text, text, "plain"]


def test_table_cell_escapes_only_what_splits_a_row() -> None:
    assert table_cell("**v3** `x|y` a|b a\\|b\nnext") == "**v3** `x\\|y` a\\|b a\\|b next"
    assert table_cell("`a\\|b`") == "`a\\\\|b`", "inside code a backslash is literal: the pipe gets its own"


@pytest.mark.parametrize("text", ["a|b", "x`y", "``double``", "`edge", "edge`", " spaced ", "plain"])
def test_code_span_holds_any_text(text: str) -> None:
    [paragraph] = [t for t in RENDERER.parse(code_span(text)) if t.type == "inline"]
    assert [(c.type, c.content) for c in paragraph.children or []] == [("code_inline", text)]


def test_split_fenced_finds_blocks_and_gives_the_text_back() -> None:
    text = "intro\n```bash\necho a | b\n\n# not a heading\n```\nmiddle\n~~~~\n```\nstill code\n~~~~\nend\n"
    blocks = split_fenced(text)
    assert "".join(b.text for b in blocks) == text
    assert [(b.code, b.fence) for b in blocks] == [(False, ""), (True, "```"), (False, ""), (True, "~~~~"), (False, "")]
    assert blocks[1].text == "```bash\necho a | b\n\n# not a heading\n```\n"
    assert blocks[3].text == "~~~~\n```\nstill code\n~~~~\n", "a fence of another kind does not close a block"


def test_split_fenced_open_ends() -> None:
    assert split_fenced("text\n```py\nprint(1)\n")[-1] == Block(
        "```py\nprint(1)\n", code=True, fence="```", closed=False
    )
    assert split_fenced("x = 1\n```\nprose\n", inside="```") == [
        Block("x = 1\n```\n", code=True, fence="```", opened=False),
        Block("prose\n"),
    ]
    # A closing fence is bare and at least as long as the opening one.
    assert not split_fenced("````\n```\nin\n```py\nstill in\n")[0].closed
    assert split_fenced("``` `not` a fence\n") == [Block("``` `not` a fence\n")]


def test_close_fences() -> None:
    assert close_fences("see:\n```bash\nls | wc -l") == "see:\n```bash\nls | wc -l\n```"
    assert close_fences("```\nx\n```\n") == "```\nx\n```\n"


def test_inline_code_spans() -> None:
    text = "a `b. c` d ``e`f`` g `unclosed"
    assert [text[s:e] for s, e in inline_code_spans(text)] == ["`b. c`", "``e`f``"]
