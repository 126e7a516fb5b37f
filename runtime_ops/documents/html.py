"""HTML pages as Markdown (pure): headings, code blocks as fenced blocks (which the chunker keeps whole), lists and
tables, without the page's boilerplate (navigation, the page header and footer, asides, scripts, styles, forms).

Two passes. The first reads the page with the standard library's streaming `html.parser`, which never recurses,
so no page can exhaust the stack: it drops the boilerplate elements with everything in them, closes what HTML
closes without an end tag (a paragraph at the next block, a list item at the next item, a table cell at the next
cell), ignores stray end tags, keeps at most `MAX_DEPTH` elements open (a tag deeper than that is dropped, its text
kept) and writes the rest as balanced HTML. The second is markdownify on BeautifulSoup's tree of that HTML.
"""

from __future__ import annotations

import re
from html import escape
from html.parser import HTMLParser
from typing import Any

from runtime_ops.documents.decoding import QuarantineError, clean_title, decode_text

# Dropped with their content wherever they are. A <header> is the page's banner only outside an article or the
# main content (inside one it holds the article's own title), so it is dropped only there.
BOILERPLATE = frozenset(
    ("nav", "footer", "aside", "script", "style", "head", "noscript", "template", "svg", "form", "iframe", "button")
)
_CONTENT = frozenset(("article", "main"))
# Deeper than this, an element is not kept (its text is): markdownify converts a tree recursively, and no page
# needs more levels than this to say what it says.
MAX_DEPTH = 64
_VOID = frozenset(
    ("br", "hr", "img", "input", "meta", "link", "wbr", "col", "area", "base", "embed", "source", "track", "param")
)
_BLOCKS = frozenset(
    (
        *("address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset", "figcaption", "figure"),
        *("footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "menu", "nav", "ol", "p"),
        *("pre", "section", "table", "ul"),
    )
)
# HTML's implied end tags: a start tag closes the open elements of a rule's first set, as deep as the lowest of
# them above the first of its boundaries (an <li> closes the <li> of its own list, not of an outer one).
_Rule = tuple[frozenset[str], frozenset[str]]
_TABLE = frozenset(("table",))
_P: _Rule = (frozenset(("p",)), frozenset(("table", "td", "th", "caption", "li", "dd", "dt", "button")))
_RULES: dict[str, tuple[_Rule, ...]] = {
    **{tag: (_P,) for tag in _BLOCKS},
    "li": ((frozenset(("li",)), frozenset(("ul", "ol", "menu", "table"))), _P),
    "dt": ((frozenset(("dt", "dd")), frozenset(("dl", "table"))), _P),
    "dd": ((frozenset(("dt", "dd")), frozenset(("dl", "table"))), _P),
    "tr": ((frozenset(("tr", "td", "th")), frozenset(("table", "thead", "tbody", "tfoot"))),),
    "td": ((frozenset(("td", "th")), frozenset(("tr", "table"))),),
    "th": ((frozenset(("td", "th")), frozenset(("tr", "table"))),),
    **dict.fromkeys(("thead", "tbody", "tfoot"), ((frozenset(("thead", "tbody", "tfoot", "tr", "td", "th")), _TABLE),)),
    "option": ((frozenset(("option",)), frozenset(("select", "datalist", "optgroup"))),),
}
_SPACE = re.compile(r"\s+")
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang|highlight|sourceCode)-([\w+#.-]+)")
_WRITTEN, _DROPPED, _INSIDE = "written", "dropped", "inside"  # an open element: kept, boilerplate, within one


class _Cleaner(HTMLParser):
    """Balanced HTML of a page's content (see the module's docstring), with its <title> and first <h1>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.stack: list[tuple[str, str]] = []  # open elements: (tag, _WRITTEN | _DROPPED | _INSIDE)
        self.skipping = 0  # open boilerplate elements
        self.title: str | None = None
        self.h1: str | None = None
        self._title: list[str] | None = None
        self._h1: list[str] | None = None

    def _close_to(self, index: int) -> None:
        """Close every open element from the top of the stack down to `index`, included."""
        while len(self.stack) > index:
            tag, kind = self.stack.pop()
            if kind == _WRITTEN:
                self.out.append(f"</{tag}>")
                if tag == "h1" and self._h1 is not None:
                    self.h1, self._h1 = "".join(self._h1), None
            elif kind == _DROPPED:
                self.skipping -= 1

    def _implied_end(self, tag: str) -> None:
        for closes, boundaries in _RULES.get(tag, ()):
            lowest = None
            for i in range(len(self.stack) - 1, -1, -1):
                open_tag = self.stack[i][0]
                if open_tag in closes:
                    lowest = i
                elif open_tag in boundaries:
                    break
            if lowest is not None:
                self._close_to(lowest)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and self.title is None and not any(t == "svg" for t, _ in self.stack):
            self._title = []  # in <head>, which is dropped: the title is read all the same
            return
        if tag in ("html", "body"):
            if tag == "body":  # <head> is often left unclosed; <body> ends it regardless
                self._close_to(next((i for i, (t, _) in enumerate(self.stack) if t == "head"), len(self.stack)))
            return
        self._implied_end(tag)
        if tag in _VOID:
            if not self.skipping and tag in ("br", "hr"):
                self.out.append(f"<{tag}>")
            return
        if len(self.stack) >= MAX_DEPTH:
            return  # too deep: the tag is dropped, its text kept
        if self.skipping:
            self.stack.append((tag, _INSIDE))
        elif tag in BOILERPLATE or (tag == "header" and not any(t in _CONTENT for t, _ in self.stack)):
            self.stack.append((tag, _DROPPED))
            self.skipping += 1
        else:
            self.stack.append((tag, _WRITTEN))
            # Only a code block's class is kept (its language); every other attribute is noise to a retriever.
            cls = next((v for k, v in attrs if k == "class" and v), None) if tag in ("pre", "code") else None
            self.out.append(f'<{tag} class="{escape(cls)}">' if cls else f"<{tag}>")
            if tag == "h1" and self.h1 is None and self._h1 is None:
                self._h1 = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title is not None:
            self.title, self._title = "".join(self._title), None
            return
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                self._close_to(i)
                return
        # A stray end tag (nothing of its kind is open) is ignored.

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
            return
        if self.skipping:
            return
        if not any(t == "pre" for t, _ in self.stack):
            data = _SPACE.sub(" ", data)  # a line break in the source is a space on the page, except in <pre>
        if self._h1 is not None:
            self._h1.append(data)
        self.out.append(escape(data, quote=False))

    def finish(self) -> str:
        self.close()
        self._close_to(0)
        return "".join(self.out)


def _language(element: Any) -> str | None:
    """The language of a code block, from the class of its <pre> or <code> (language-python, lang-sh, ...)."""
    for candidate in (element, element.find("code")):
        classes = candidate.get("class") if candidate is not None else None
        match = _LANGUAGE.search(" ".join(classes) if isinstance(classes, list) else str(classes or ""))
        if match:
            return match.group(1)
    return None


def parse_html(data: bytes) -> tuple[str | None, str]:
    """(title, Markdown) of an HTML page: its <title>, else its first <h1>; its content without the boilerplate."""
    from markdownify import markdownify

    source = decode_text(data, "HTML")
    cleaner = _Cleaner()
    try:
        cleaner.feed(source)
        html = cleaner.finish()
    except Exception as exc:  # html.parser is lenient, but assertion errors on odd markup are possible
        raise QuarantineError("corrupt", f"corrupt HTML: {exc}") from None
    text = markdownify(
        html,
        heading_style="ATX",
        bullets="-",
        strip=["a", "img"],  # a link's text is kept, its address is noise to a retriever
        code_language_callback=_language,
        table_infer_header=True,  # a table without <th> still gets its first row as the header
        # The text is embedded and searched, not rendered: `__init__` stays `__init__`.
        escape_asterisks=False,
        escape_underscores=False,
        escape_misc=False,
    )
    title = clean_title(cleaner.title) or clean_title(cleaner.h1) or None
    return title, text
