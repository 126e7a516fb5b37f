"""One parser per format (text, markdown, JSON, JSONL, PDF; HTML: `documents.html`): raw bytes -> (title or None,
text) (pure)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from typing import Any

from runtime_ops.documents.decoding import QuarantineError, decode_text, describe, first_line_title

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
