"""Turn the raw bytes of a landed object into text, or say precisely why not.

Pure logic: no Dagster, database or network. A document that cannot be used raises `QuarantineError`
with a stable `code` (for metrics and filtering) and a `reason` written for the operator who has to fix
the file, so one bad object is quarantined instead of failing the whole landing batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from runtime_ops.documents.decoding import (
    QuarantineError,
    clean_title,
    fallback_title,
    human_size,
    normalise_whitespace,
)

__all__ = ["SUPPORTED_EXTENSIONS", "ParsedDocument", "QuarantineError", "normalise_whitespace", "parse_document"]

from runtime_ops.documents.formats import (
    parse_json,
    parse_jsonl,
    parse_markdown,
    parse_pdf,
    parse_text,
)
from runtime_ops.documents.html import parse_html


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    text: str
    format: str
    content_hash: str  # sha256 hex of the raw bytes, so the same bytes are never processed twice


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
            f"file is {human_size(len(data))}, over the {human_size(max_bytes)} limit (RUNTIME_OPS_MAX_DOCUMENT_BYTES)",
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
    title = clean_title(title) or (fallback_title(text, path) if title is None else path.stem or path.name)
    return ParsedDocument(title=title, text=text, format=fmt, content_hash=hashlib.sha256(data).hexdigest())


_Parser = Callable[[bytes], tuple[str | None, str]]
_PARSERS: dict[str, tuple[str, _Parser]] = {
    ".txt": ("text", parse_text),
    ".text": ("text", parse_text),
    ".md": ("markdown", parse_markdown),
    ".markdown": ("markdown", parse_markdown),
    ".html": ("html", parse_html),
    ".htm": ("html", parse_html),
    ".json": ("json", parse_json),
    ".jsonl": ("jsonl", parse_jsonl),
    ".pdf": ("pdf", parse_pdf),
}
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_PARSERS)
