"""One parser per format (text, markdown, HTML, JSON, JSONL, PDF): raw bytes -> (title or None, text) (pure)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any

from runtime_ops.documents.decoding import QuarantineError, clean_title, decode_text, describe, first_line_title

# --- formats -----------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)(?:\s+#+)?\s*$")
_SETEXT_UNDERLINE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def parse_text(data: bytes) -> tuple[str | None, str]:
    return None, decode_text(data, "text")


def parse_markdown(data: bytes) -> tuple[str | None, str]:
    text = decode_text(data, "markdown")
    return _markdown_title(text), text


def _markdown_title(text: str) -> str:
    """The first heading; failing that, the first line of prose (code blocks never provide a title)."""
    in_fence = False
    previous = ""
    prose: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence  # a "# comment" inside a code block is not a heading
            previous = ""
            continue
        if in_fence:
            continue
        match = _ATX_HEADING.match(line)
        if match:
            return _strip_inline_markdown(match.group(1))
        if previous.strip() and _SETEXT_UNDERLINE.match(line):
            return _strip_inline_markdown(previous)
        previous = line
        prose.append(line)
    return first_line_title("\n".join(prose)) or ""


def _strip_inline_markdown(s: str) -> str:
    s = _MD_LINK.sub(r"\1", s)
    return s.replace("`", "").replace("**", "").replace("__", "").strip()


class _HTMLText(HTMLParser):
    """Visible text of an HTML page, with block elements turned into paragraph breaks."""

    _SKIP = frozenset(("script", "style", "head", "noscript", "template", "svg"))
    _LINE = frozenset(("br", "li", "tr", "dt", "dd", "option"))
    _BLOCK = frozenset(
        (
            "p",
            "div",
            "section",
            "article",
            "header",
            "footer",
            "nav",
            "aside",
            "main",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "ul",
            "ol",
            "dl",
            "table",
            "thead",
            "tbody",
            "blockquote",
            "pre",
            "figure",
            "figcaption",
            "hr",
            "form",
            "fieldset",
            "address",
            "details",
            "summary",
            "body",
        )
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []
        self._pre = 0
        self._title: list[str] | None = None
        self.title: str | None = None
        self._h1: list[str] | None = None
        self.h1: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body" and "head" in self._skipping:
            self._skipping.remove("head")  # <head> is often left unclosed; <body> ends it regardless
        if tag == "title" and self.title is None and "svg" not in self._skipping:
            self._title = []
        elif tag in self._SKIP:
            self._skipping.append(tag)
        elif tag == "h1" and self.h1 is None:
            self._h1 = []
        if tag == "pre":
            self._pre += 1
        self._break(tag, opening=True)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title is not None:
            self.title = "".join(self._title)
            self._title = None
        elif tag in self._SKIP and tag in self._skipping:
            # Pop back to the matching element so one stray end tag cannot hide the rest of the page.
            while self._skipping and self._skipping.pop() != tag:
                pass
        elif tag == "h1" and self._h1 is not None:
            self.h1 = "".join(self._h1)
            self._h1 = None
        if tag == "pre" and self._pre:
            self._pre -= 1
        self._break(tag, opening=False)

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
            return
        if self._skipping:
            return
        if not self._pre:
            data = re.sub(r"\s+", " ", data)  # source line breaks are not visible breaks outside <pre>
        if self._h1 is not None:
            self._h1.append(data)
        self.parts.append(data)

    def _break(self, tag: str, *, opening: bool) -> None:
        if self._skipping:
            return
        if tag in self._BLOCK:
            self.parts.append("\n\n")
        # Line-level elements break only where they start: "</li><li>" is one line break, not a paragraph.
        elif opening and tag in self._LINE:
            self.parts.append("\n")
        elif opening and tag in ("td", "th"):
            self.parts.append(" ")


def parse_html(data: bytes) -> tuple[str | None, str]:
    source = decode_text(data, "HTML")
    extractor = _HTMLText()
    try:
        extractor.feed(source)
        extractor.close()
    except Exception as exc:  # html.parser is lenient, but assertion errors on odd markup are possible
        raise QuarantineError("corrupt", f"corrupt HTML: {exc}") from None
    title = clean_title(extractor.title) or clean_title(extractor.h1) or None
    return title, "".join(extractor.parts)


_TEXT_FIELDS = ("text", "body", "content", "abstract")


def _record_parts(record: dict[str, Any]) -> tuple[str | None, str]:
    title = record.get("title") if isinstance(record.get("title"), str) else None
    values = [record[f] for f in _TEXT_FIELDS if isinstance(record.get(f), str) and record[f].strip()]
    if not values:
        # No conventional text field: every string value is better than nothing (ids and urls included).
        for name, value in record.items():
            if name == "title":
                continue
            if isinstance(value, str):
                values.append(value)
            elif isinstance(value, list):
                values.extend(v for v in value if isinstance(v, str))
    return title, "\n\n".join(v for v in values if v.strip())


def _records_to_text(records: Iterable[dict[str, Any]]) -> tuple[str | None, str]:
    first_title: str | None = None
    blocks: list[str] = []
    has_body = False
    for record in records:
        title, body = _record_parts(record)
        first_title = first_title or (title.strip() if title else None)
        has_body = has_body or bool(body.strip())
        # Record titles go into the text: in a multi-record file they exist nowhere else.
        block = "\n\n".join(part for part in (title, body) if part and part.strip())
        if block:
            blocks.append(block)
    # A file whose records carry titles but no text has nothing worth embedding.
    return first_title, "\n\n".join(blocks) if has_body else ""


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def parse_json(data: bytes) -> tuple[str | None, str]:
    source = decode_text(data, "JSON")
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise QuarantineError("corrupt", f"corrupt JSON: {exc}") from None
    except RecursionError:
        raise QuarantineError("corrupt", "corrupt JSON: nested too deeply to parse") from None
    if isinstance(value, dict):
        return _records_to_text([value])
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise QuarantineError(
                    "corrupt",
                    f"corrupt JSON: item {i} of the top-level list is {_json_kind(item)}, not an object",
                )
        return _records_to_text(value)
    raise QuarantineError("corrupt", f"corrupt JSON: expected an object or a list of objects, got {_json_kind(value)}")


def parse_jsonl(data: bytes) -> tuple[str | None, str]:
    source = decode_text(data, "JSONL")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(source.splitlines(), start=1):
        if not line.strip():
            continue  # a trailing or spacer blank line is common and harmless
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuarantineError("corrupt", f"corrupt JSONL: line {number}: {exc}") from None
        except RecursionError:
            raise QuarantineError("corrupt", f"corrupt JSONL: line {number}: nested too deeply") from None
        if not isinstance(value, dict):
            raise QuarantineError("corrupt", f"corrupt JSONL: line {number} is {_json_kind(value)}, not a JSON object")
        records.append(value)
    return _records_to_text(records)


def parse_pdf(data: bytes) -> tuple[str | None, str]:
    # Imported here: pypdf is heavy and only PDF documents need it, not every process importing this module.
    from pypdf import PdfReader

    if b"%PDF-" not in data[:1024]:
        raise QuarantineError("corrupt", "corrupt PDF: no %PDF- header (is this really a PDF?)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _decrypt_with_empty_password(reader):
            raise QuarantineError("corrupt", "corrupt PDF: encrypted, and text cannot be read without the password")
        pages: list[str] = []
        for number, page in enumerate(reader.pages, start=1):
            try:
                pages.append(page.extract_text() or "")
            except Exception as exc:
                raise QuarantineError("corrupt", f"corrupt PDF: page {number}: {describe(exc)}") from None
        title = _pdf_title(reader)
    except QuarantineError:
        raise
    except Exception as exc:  # pypdf raises a wide range of types on damaged files
        raise QuarantineError("corrupt", f"corrupt PDF: {describe(exc)}") from None
    return title, "\n\n".join(pages)


def _decrypt_with_empty_password(reader: Any) -> bool:
    # Many "encrypted" PDFs only restrict printing/copying and open with an empty user password.
    try:
        return bool(reader.decrypt(""))
    except Exception:  # missing AES backend or a real password: both mean we cannot read it
        return False


def _pdf_title(reader: Any) -> str | None:
    try:
        metadata = reader.metadata
        title = metadata.title if metadata else None
    except Exception:  # a broken info dictionary should not lose an otherwise readable document
        return None
    return title if isinstance(title, str) else None
