"""Turn the raw bytes of a landed object into text, or say precisely why not.

Pure logic: no Dagster, database or network. A document that cannot be used raises `QuarantineError`
with a stable `code` (for metrics and filtering) and a `reason` written for the operator who has to fix
the file, so one bad object is quarantined instead of failing the whole landing batch.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Any, Literal

QuarantineCode = Literal["oversized", "empty", "binary", "not_utf8", "corrupt", "unsupported"]
QUARANTINE_CODES: frozenset[str] = frozenset(("oversized", "empty", "binary", "not_utf8", "corrupt", "unsupported"))

MAX_TITLE_CHARS = 120
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    text: str
    format: str
    content_hash: str  # sha256 hex of the raw bytes, so the same bytes are never processed twice


class QuarantineError(Exception):
    """The document cannot be ingested; `code` is machine-readable, `reason` is for humans."""

    def __init__(self, code: QuarantineCode, reason: str) -> None:
        if code not in QUARANTINE_CODES:
            raise ValueError(f"unknown quarantine code {code!r}; expected one of {sorted(QUARANTINE_CODES)}")
        super().__init__(reason)
        self.code: str = code
        self.reason: str = reason

    def __str__(self) -> str:
        return self.reason

    def __reduce__(self) -> tuple[type[QuarantineError], tuple[str, str]]:
        # Exceptions pickle as cls(*args) by default, which would drop `code`; multiprocess executors
        # pickle step failures, so keep both fields.
        return (type(self), (self.code, self.reason))


def parse_document(key: str, data: bytes, *, max_bytes: int) -> ParsedDocument:
    """Parse `data` (the object stored at `key`) into a `ParsedDocument`, or raise `QuarantineError`.

    The format comes from the key's extension (case-insensitive). Checks run cheapest-first: size before
    anything is decoded, so an oversized upload costs nothing but its length.
    """
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    if len(data) > max_bytes:
        raise QuarantineError(
            "oversized",
            f"file is {_human_size(len(data))}, over the {_human_size(max_bytes)} limit "
            "(RUNTIME_OPS_MAX_DOCUMENT_BYTES)",
        )
    path = PurePosixPath(key)
    suffix = path.suffix.lower()
    parser = _PARSERS.get(suffix)
    if parser is None:
        supported = ", ".join(sorted(_PARSERS))
        what = f"file type {suffix!r}" if suffix else "file without an extension"
        raise QuarantineError("unsupported", f"unsupported {what}; supported types are {supported}")
    fmt, parse = parser
    if not data:
        raise QuarantineError("empty", "file is empty (0 bytes)")

    title, text = parse(data)
    text = normalise_whitespace(text)
    if not text:
        if fmt == "pdf":
            raise QuarantineError("empty", "no text could be extracted from the PDF (scanned pages need OCR)")
        raise QuarantineError("empty", f"no text left after extracting the {fmt} content (whitespace only)")
    # A parser returns None to ask for the generic fallback, or "" when it knows no line of the text is a
    # title (markdown whose only candidate lines are code).
    title = _clean_title(title) or (_fallback_title(text, path) if title is None else path.stem or path.name)
    return ParsedDocument(title=title, text=text, format=fmt, content_hash=hashlib.sha256(data).hexdigest())


# --- whitespace and titles ---------------------------------------------------------------------------

_INLINE_SPACE = re.compile(r"[^\S\n]+")  # any whitespace except a newline
# C0/C1 control characters other than tab/newline/CR carry no meaning in text and confuse tokenizers.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def normalise_whitespace(text: str) -> str:
    """Collapse runs of spaces, keep single line breaks, and make every paragraph break exactly "\\n\\n"."""
    text = _CONTROL.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in text.split("\n"):
        line = _INLINE_SPACE.sub(" ", raw).strip()
        if line:
            current.append(line)
        elif current:
            paragraphs.append("\n".join(current))
            current = []
    if current:
        paragraphs.append("\n".join(current))
    return "\n\n".join(paragraphs)


def _clean_title(title: str | None) -> str:
    if not title:
        return ""
    title = _INLINE_SPACE.sub(" ", title.replace("\n", " ")).strip()
    if len(title) > MAX_TITLE_CHARS:
        # An explicit title this long is still the author's title; shorten it rather than discard it.
        title = title[: MAX_TITLE_CHARS - 1].rsplit(" ", 1)[0].rstrip() + "…"
    return title


def _fallback_title(text: str, path: PurePosixPath) -> str:
    return _first_line_title(text) or path.stem or path.name


def _first_line_title(text: str) -> str | None:
    for line in text.split("\n"):
        line = line.strip()
        if not any(ch.isalnum() for ch in line):
            continue  # rules, fences and bullets alone ("---", "~~~", "*") say nothing
        # A first line longer than a title is the start of a paragraph, not a heading.
        return line if len(line) <= MAX_TITLE_CHARS else None
    return None


def _human_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


# --- decoding ----------------------------------------------------------------------------------------


def _decode_text(data: bytes, fmt: str) -> str:
    """Decode a text format strictly: UTF-8 (optionally with a BOM), no NUL bytes."""
    if data.startswith(_UTF16_BOMS):
        raise QuarantineError(
            "not_utf8", "not valid UTF-8: the file starts with a UTF-16 byte-order mark; save it as UTF-8"
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise QuarantineError(
            "binary", f"binary content in a {fmt} file: NUL byte at offset {nul} (is this really text?)"
        )
    skip = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        raise QuarantineError(
            "not_utf8", f"not valid UTF-8: {exc.reason} 0x{data[offset]:02x} at offset {offset}"
        ) from None


# --- formats -----------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)(?:\s+#+)?\s*$")
_SETEXT_UNDERLINE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _parse_text(data: bytes) -> tuple[str | None, str]:
    return None, _decode_text(data, "text")


def _parse_markdown(data: bytes) -> tuple[str | None, str]:
    text = _decode_text(data, "markdown")
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
    return _first_line_title("\n".join(prose)) or ""


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


def _parse_html(data: bytes) -> tuple[str | None, str]:
    source = _decode_text(data, "HTML")
    extractor = _HTMLText()
    try:
        extractor.feed(source)
        extractor.close()
    except Exception as exc:  # html.parser is lenient, but assertion errors on odd markup are possible
        raise QuarantineError("corrupt", f"corrupt HTML: {exc}") from None
    title = _clean_title(extractor.title) or _clean_title(extractor.h1) or None
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


def _parse_json(data: bytes) -> tuple[str | None, str]:
    source = _decode_text(data, "JSON")
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


def _parse_jsonl(data: bytes) -> tuple[str | None, str]:
    source = _decode_text(data, "JSONL")
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


def _parse_pdf(data: bytes) -> tuple[str | None, str]:
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
                raise QuarantineError("corrupt", f"corrupt PDF: page {number}: {_describe(exc)}") from None
        title = _pdf_title(reader)
    except QuarantineError:
        raise
    except Exception as exc:  # pypdf raises a wide range of types on damaged files
        raise QuarantineError("corrupt", f"corrupt PDF: {_describe(exc)}") from None
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


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


_Parser = Callable[[bytes], tuple[str | None, str]]
_PARSERS: dict[str, tuple[str, _Parser]] = {
    ".txt": ("text", _parse_text),
    ".text": ("text", _parse_text),
    ".md": ("markdown", _parse_markdown),
    ".markdown": ("markdown", _parse_markdown),
    ".html": ("html", _parse_html),
    ".htm": ("html", _parse_html),
    ".json": ("json", _parse_json),
    ".jsonl": ("jsonl", _parse_jsonl),
    ".pdf": ("pdf", _parse_pdf),
}
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_PARSERS)
