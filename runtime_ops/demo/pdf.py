"""A tiny hand-written PDF writer for the demo corpus and tests.

Generating PDFs ourselves keeps the corpus reproducible and avoids a PDF-writing dependency; only the
parser side (pypdf) is a real dependency. The output is deliberately plain: uncompressed content streams,
the standard Helvetica font (no embedding needed), WinAnsi text, one `Tj` per line.
"""

from __future__ import annotations

import textwrap

PAGE_WIDTH = 612  # US Letter, in points
PAGE_HEIGHT = 792
MARGIN = 72
FONT_SIZE = 11
LEADING = 14
# Helvetica averages roughly half an em per character, so ~85 characters fill the 468pt text width.
WRAP_COLUMNS = 85
LINES_PER_PAGE = (PAGE_HEIGHT - 2 * MARGIN) // LEADING


def minimal_pdf(pages: list[str], *, title: str | None = None) -> bytes:
    """Return a valid PDF with one page per string (more if a string overflows a page).

    Lines are word-wrapped to fit the page; characters outside Windows-1252 become "?" because the standard
    fonts cannot show them. `title` goes into the document information dictionary.
    """
    page_lines: list[list[str]] = []
    for page in pages:
        lines = _wrap(page)
        # An overflowing string continues on extra pages rather than running off the bottom edge.
        for start in range(0, max(len(lines), 1), LINES_PER_PAGE):
            page_lines.append(lines[start : start + LINES_PER_PAGE])
    if not page_lines:
        page_lines.append([])  # a PDF needs at least one page to be valid

    # Object numbers: 1 catalog, 2 page tree, 3 font, 4 info, then (page, content) pairs.
    first_page = 5
    page_ids = [first_page + 2 * i for i in range(len(page_lines))]
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % pid for pid in page_ids), len(page_ids)),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: b"<< /Producer (runtime_ops minimal_pdf)%s >>" % (b" /Title " + _text_string(title) if title else b""),
    }
    for pid, lines in zip(page_ids, page_lines, strict=True):
        stream = _content_stream(lines)
        objects[pid] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 3 0 R >> >>"
            b" /Contents %d 0 R >>" % (PAGE_WIDTH, PAGE_HEIGHT, pid + 1)
        )
        objects[pid + 1] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)

    # The binary comment on line 2 tells transfer tools to treat the file as binary.
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for num in sorted(objects):
        offsets[num] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (num, objects[num])
    xref_at = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n" % size
    # Each xref entry must be exactly 20 bytes; " \n" is one of the two-byte line ends the spec allows.
    out += b"0000000000 65535 f \n"
    for num in range(1, size):
        out += b"%010d 00000 n \n" % offsets[num]
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref_at)
    return bytes(out)


def _wrap(page: str) -> list[str]:
    lines: list[str] = []
    for raw in page.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        raw = raw.expandtabs(4).rstrip()
        if not raw:
            lines.append("")
            continue
        indent = raw[: len(raw) - len(raw.lstrip())]
        lines.extend(
            textwrap.wrap(
                raw.strip(),
                width=WRAP_COLUMNS,
                initial_indent=indent,
                subsequent_indent=indent,
                break_long_words=True,
                break_on_hyphens=False,
            )
        )
    return lines


def _content_stream(lines: list[str]) -> bytes:
    ops = [b"BT", b"/F1 %d Tf" % FONT_SIZE, b"%d TL" % LEADING, b"%d %d Td" % (MARGIN, PAGE_HEIGHT - MARGIN)]
    for line in lines:
        # A blank line is drawn as a single space: text extractors (pypdf) only emit a line break for a
        # line that shows something, so this is what keeps paragraph breaks when the text is read back.
        ops.append(b"(%s) Tj" % _escape(line.encode("cp1252", errors="replace")) if line else b"( ) Tj")
        ops.append(b"T*")
    ops.append(b"ET")
    return b"\n".join(ops)


def _escape(raw: bytes) -> bytes:
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _text_string(value: str) -> bytes:
    """Encode an information-dictionary string: literal if Latin-1, else UTF-16BE hex with a BOM."""
    try:
        return b"(" + _escape(value.encode("latin-1")) + b")"
    except UnicodeEncodeError:
        return b"<FEFF" + value.encode("utf-16-be").hex().upper().encode("ascii") + b">"
