"""What every format parser shares: the quarantine error, text decoding, whitespace and titles (pure)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

QuarantineCode = Literal["oversized", "empty", "binary", "not_utf8", "corrupt", "unsupported", "too_slow"]
QUARANTINE_CODES: frozenset[str] = frozenset(
    ("oversized", "empty", "binary", "not_utf8", "corrupt", "unsupported", "too_slow")
)

MAX_TITLE_CHARS = 120
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


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


def clean_title(title: str | None) -> str:
    if not title:
        return ""
    title = _INLINE_SPACE.sub(" ", title.replace("\n", " ")).strip()
    if len(title) > MAX_TITLE_CHARS:
        # An explicit title this long is still the author's title; shorten it rather than discard it.
        title = title[: MAX_TITLE_CHARS - 1].rsplit(" ", 1)[0].rstrip() + "…"
    return title


def fallback_title(text: str, path: PurePosixPath) -> str:
    return first_line_title(text) or path.stem or path.name


def first_line_title(text: str) -> str | None:
    for line in text.split("\n"):
        line = line.strip()
        if not any(ch.isalnum() for ch in line):
            continue  # rules, fences and bullets alone ("---", "~~~", "*") say nothing
        # A first line longer than a title is the start of a paragraph, not a heading.
        return line if len(line) <= MAX_TITLE_CHARS else None
    return None


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


# --- decoding ----------------------------------------------------------------------------------------


def decode_text(data: bytes, fmt: str) -> str:
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


def describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
