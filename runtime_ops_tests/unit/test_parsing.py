from __future__ import annotations

import hashlib
import io
import json
import pickle
import subprocess
import sys

import pytest

from runtime_ops.demo.pdf import minimal_pdf
from runtime_ops.documents.parsing import (
    QuarantineError,
    normalise_whitespace,
    parse_document,
)

MB = 1024 * 1024
LIMIT = 10 * MB


def quarantine(key: str, data: bytes, *, max_bytes: int = LIMIT) -> QuarantineError:
    with pytest.raises(QuarantineError) as info:
        parse_document(key, data, max_bytes=max_bytes)
    return info.value


# --- quarantine codes and reasons --------------------------------------------------------------------


def test_oversized_names_both_sizes_and_the_setting() -> None:
    exc = quarantine("big.txt", b"a" * int(1.5 * MB), max_bytes=MB)
    assert exc.code == "oversized"
    assert exc.reason == "file is 1.5 MB, over the 1.0 MB limit (RUNTIME_OPS_MAX_DOCUMENT_BYTES)"
    assert str(exc) == exc.reason


def test_oversized_is_checked_before_anything_else() -> None:
    # Neither decoding nor the extension is looked at: a huge object costs nothing but its length.
    assert quarantine("huge.bin", b"\xff" * 2048, max_bytes=1024).code == "oversized"
    assert quarantine("huge.txt", b"\x00" * 2048, max_bytes=1024).reason == (
        "file is 2.0 KB, over the 1.0 KB limit (RUNTIME_OPS_MAX_DOCUMENT_BYTES)"
    )
    assert quarantine("small.txt", b"x" * 11, max_bytes=10).reason == (
        "file is 11 bytes, over the 10 bytes limit (RUNTIME_OPS_MAX_DOCUMENT_BYTES)"
    )


def test_a_file_exactly_at_the_limit_is_accepted() -> None:
    assert parse_document("ok.txt", b"x" * 10, max_bytes=10).text == "x" * 10


def test_max_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        parse_document("a.txt", b"x", max_bytes=0)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (
            "report.docx",
            "unsupported file type '.docx'; supported types are "
            ".htm, .html, .json, .jsonl, .markdown, .md, .pdf, .text, .txt",
        ),
        (
            "Makefile",
            "unsupported file without an extension; supported types are "
            ".htm, .html, .json, .jsonl, .markdown, .md, .pdf, .text, .txt",
        ),
    ],
)
def test_unsupported_extension(key: str, reason: str) -> None:
    exc = quarantine(key, b"hello")
    assert (exc.code, exc.reason) == ("unsupported", reason)


def test_empty_file() -> None:
    exc = quarantine("nothing.md", b"")
    assert (exc.code, exc.reason) == ("empty", "file is empty (0 bytes)")


@pytest.mark.parametrize(
    ("key", "data", "reason"),
    [
        ("blank.txt", b"  \n\t\r\n   \n", "no text left after extracting the text content (whitespace only)"),
        ("bom.md", b"\xef\xbb\xbf\n\n", "no text left after extracting the markdown content (whitespace only)"),
        (
            "markup.html",
            b"<html><head><title>T</title><script>var x = 1;</script></head><body> <div></div> </body></html>",
            "no text left after extracting the html content (whitespace only)",
        ),
        ("titles.json", b'[{"title": "A"}, {"title": "B", "text": "  "}]', None),
        ("blank.jsonl", b"\n\n", None),
        ("blank.pdf", minimal_pdf([]), "no text could be extracted from the PDF (scanned pages need OCR)"),
    ],
)
def test_whitespace_only_after_extraction_is_empty(key: str, data: bytes, reason: str | None) -> None:
    exc = quarantine(key, data)
    assert exc.code == "empty"
    if reason:
        assert exc.reason == reason


def test_nul_byte_in_a_text_format_is_binary() -> None:
    exc = quarantine("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert exc.code == "binary"
    assert exc.reason == "binary content in a text file: NUL byte at offset 8 (is this really text?)"
    assert quarantine("data.json", b'{"a": "\x00"}').reason.startswith("binary content in a JSON file: NUL byte")


def test_invalid_utf8_reports_the_byte_and_offset() -> None:
    exc = quarantine("notes.txt", b"hello world \xff and more")
    assert exc.code == "not_utf8"
    assert exc.reason == "not valid UTF-8: invalid start byte 0xff at offset 12"


def test_latin1_text_is_not_utf8() -> None:
    exc = quarantine("menu.md", "# Café crème\n\nbien sûr".encode("latin-1"))
    assert exc.code == "not_utf8"
    assert exc.reason == "not valid UTF-8: invalid continuation byte 0xe9 at offset 5"


def test_offsets_count_the_bom() -> None:
    exc = quarantine("bom.txt", b"\xef\xbb\xbfab\xc3")
    assert exc.reason == "not valid UTF-8: unexpected end of data 0xc3 at offset 5"


def test_utf16_is_reported_as_such_not_as_binary() -> None:
    exc = quarantine("windows.txt", "hello".encode("utf-16"))
    assert exc.code == "not_utf8"
    assert exc.reason == "not valid UTF-8: the file starts with a UTF-16 byte-order mark; save it as UTF-8"


@pytest.mark.parametrize(
    ("key", "data", "reason"),
    [
        (
            "bad.json",
            b'{"title": "x",}',
            "corrupt JSON: Expecting property name enclosed in double quotes: line 1 column 15 (char 14)",
        ),
        ("scalar.json", b"42", "corrupt JSON: expected an object or a list of objects, got a number"),
        (
            "mixed.json",
            b'[{"text": "a"}, "b"]',
            "corrupt JSON: item 1 of the top-level list is a string, not an object",
        ),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "corrupt JSON: nested too deeply to parse"),
        (
            "bad.jsonl",
            b'{"text": "one"}\n\n{"text": "two"\n{"text": "four"}\n',
            "corrupt JSONL: line 3: Expecting ',' delimiter: line 1 column 15 (char 14)",
        ),
        ("list.jsonl", b'{"text": "one"}\n["two"]\n', "corrupt JSONL: line 2 is a list, not a JSON object"),
        ("fake.pdf", b"this is plain text with a .pdf name", "corrupt PDF: no %PDF- header (is this really a PDF?)"),
    ],
)
def test_corrupt_structured_documents(key: str, data: bytes, reason: str) -> None:
    exc = quarantine(key, data)
    assert (exc.code, exc.reason) == ("corrupt", reason)


def test_truncated_pdf_is_corrupt() -> None:
    data = minimal_pdf(["A page that will be cut in half."])
    exc = quarantine("cut.pdf", data[: len(data) // 2])
    assert exc.code == "corrupt"
    assert exc.reason.startswith("corrupt PDF: ")
    assert len(exc.reason) > len("corrupt PDF: ")  # says what pypdf found wrong


def _encrypted(user_password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(minimal_pdf(["Top secret plans"]))))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_password_protected_pdf_is_corrupt() -> None:
    exc = quarantine("locked.pdf", _encrypted("s3cret"))
    assert (exc.code, exc.reason) == (
        "corrupt",
        "corrupt PDF: encrypted, and text cannot be read without the password",
    )


def test_pdf_encrypted_with_an_empty_user_password_is_readable() -> None:
    # Such files only restrict permissions; every viewer opens them, so refusing them would be wrong.
    assert parse_document("restricted.pdf", _encrypted(""), max_bytes=LIMIT).text == "Top secret plans"


def test_quarantine_error_validates_code_and_survives_pickling() -> None:
    with pytest.raises(ValueError, match="unknown quarantine code"):
        QuarantineError("bogus", "whatever")  # type: ignore[arg-type]
    exc = pickle.loads(pickle.dumps(QuarantineError("corrupt", "corrupt PDF: boom")))
    assert (exc.code, exc.reason, str(exc)) == ("corrupt", "corrupt PDF: boom", "corrupt PDF: boom")


# --- formats -----------------------------------------------------------------------------------------


def test_plain_text_title_is_the_first_line_and_hash_is_of_raw_bytes() -> None:
    data = b"\xef\xbb\xbfRelease notes\r\n\r\nFixed   the\tbug.\r\nAdded a flag.\r\n\r\n\r\n\r\nThanks!\n"
    doc = parse_document("notes/release.TXT", data, max_bytes=LIMIT)
    assert doc.format == "text"
    assert doc.title == "Release notes"
    assert doc.text == "Release notes\n\nFixed the bug.\nAdded a flag.\n\nThanks!"
    assert doc.content_hash == hashlib.sha256(data).hexdigest()


def test_long_first_line_falls_back_to_the_file_stem() -> None:
    doc = parse_document("docs/long-intro.text", ("word " * 40).encode(), max_bytes=LIMIT)
    assert doc.title == "long-intro"


@pytest.mark.parametrize(
    ("source", "title"),
    [
        ("Intro text first\n\n## The `real` [title](http://x) ##\n\nbody", "The real title"),
        ("```python\n# not a heading\n```\n\nSetext Title\n============\n\nbody", "Setext Title"),
        ("~~~\n# not a heading\n~~~\nplain first line\n", "plain first line"),
        ("```\n# not a heading\n```\n" + "a long first paragraph " * 10, "guide"),
    ],
)
def test_markdown_title_is_the_first_heading_outside_code(source: str, title: str) -> None:
    doc = parse_document("guide.MARKDOWN", source.encode(), max_bytes=LIMIT)
    assert (doc.format, doc.title) == ("markdown", title)


def test_markdown_keeps_its_text() -> None:
    doc = parse_document("a.md", b"# Title\n\nSome    *emphasis* here.\n\n\n- item one\n- item two\n", max_bytes=LIMIT)
    assert doc.text == "# Title\n\nSome *emphasis* here.\n\n- item one\n- item two"


HTML_PAGE = b"""<!DOCTYPE html>
<html><head>
  <meta charset="utf-8"><title> JSON &amp; you </title>
  <style>body { color: red }</style>
  <script>console.log("tracking");</script>
</head>
<body>
  <nav>Home</nav>
  <h1>Using   <code>json</code></h1>
  <p>Call <b>json.dumps</b>
     to serialise&nbsp;objects.<br>Second line.</p>
  <ul><li>one</li><li>two</li></ul>
  <pre>x = 1
    y = 2</pre>
  <table><tr><td>a</td><td>b</td></tr></table>
  <script>alert("hidden")</script><noscript>enable js</noscript>
</body></html>"""


def test_html_visible_text_and_title() -> None:
    doc = parse_document("site/page.HTM", HTML_PAGE, max_bytes=LIMIT)
    assert doc.format == "html"
    assert doc.title == "JSON & you"
    # Markdown (see test_html_markdown.py); the navigation is boilerplate.
    assert doc.text == (
        "# Using `json`\n\nCall **json.dumps** to serialise objects.\nSecond line.\n\n- one\n- two\n\n```\nx = 1\n"
        "y = 2\n```\n\n| a | b |\n| --- | --- |"
    )
    for hidden in ("color: red", "tracking", "hidden", "enable js", "charset", "Home"):
        assert hidden not in doc.text


def test_html_title_falls_back_to_first_h1_then_first_line() -> None:
    doc = parse_document("a.html", b"<p>Intro</p><h1>Main <i>heading</i></h1><h1>Other</h1>", max_bytes=LIMIT)
    assert doc.title == "Main heading"
    doc = parse_document("b.html", b"<div>Just a line</div><p>and more</p>", max_bytes=LIMIT)
    assert doc.title == "Just a line"


def test_html_with_an_unclosed_head_still_shows_the_body() -> None:
    doc = parse_document("c.html", b"<html><head><title>T</title><body><p>Body text</p>", max_bytes=LIMIT)
    assert (doc.title, doc.text) == ("T", "Body text")


def test_json_object_uses_title_and_text_fields() -> None:
    data = json.dumps(
        {"title": "Quarterly report", "abstract": "Short summary.", "body": "Long body.", "id": "r-1"}
    ).encode()
    doc = parse_document("r.json", data, max_bytes=LIMIT)
    assert doc.format == "json"
    assert doc.title == "Quarterly report"
    # Only the conventional text fields are used, in field order; the id is noise.
    assert doc.text == "Quarterly report\n\nLong body.\n\nShort summary."


def test_json_list_of_objects_and_string_fallback() -> None:
    data = json.dumps(
        [
            {"title": "First", "content": "Alpha content."},
            {"name": "Second", "notes": ["Beta note", 3], "count": 2},
        ]
    ).encode()
    doc = parse_document("many.json", data, max_bytes=LIMIT)
    assert doc.title == "First"
    assert doc.text == "First\n\nAlpha content.\n\nSecond\n\nBeta note"


def test_json_without_any_title_uses_the_first_line() -> None:
    doc = parse_document("untitled.json", b'{"text": "Hello there.\\nMore."}', max_bytes=LIMIT)
    assert (doc.title, doc.text) == ("Hello there.", "Hello there.\nMore.")


def test_jsonl_records_are_joined_by_blank_lines() -> None:
    data = b'{"title": "One", "text": "first record"}\n\n{"text": "second record"}\r\n{"body": "third"}\n'
    doc = parse_document("records.jsonl", data, max_bytes=LIMIT)
    assert doc.format == "jsonl"
    assert doc.title == "One"
    assert doc.text == "One\n\nfirst record\n\nsecond record\n\nthird"


def test_pdf_round_trip_with_metadata_title() -> None:
    data = minimal_pdf(
        ["Retrieval basics\n\nChunks are embedded (with overlap) and ranked.\nBackslash \\ kept.", "Page two text."],
        title="RAG handbook",
    )
    doc = parse_document("manuals/rag.PDF", data, max_bytes=LIMIT)
    assert doc.format == "pdf"
    assert doc.title == "RAG handbook"
    assert doc.text == (
        "Retrieval basics\n\nChunks are embedded (with overlap) and ranked.\nBackslash \\ kept.\n\nPage two text."
    )
    assert doc.content_hash == hashlib.sha256(data).hexdigest()


def test_pdf_without_a_title_uses_its_first_line() -> None:
    doc = parse_document("x.pdf", minimal_pdf(["Installation guide\nStep one."]), max_bytes=LIMIT)
    assert doc.title == "Installation guide"


def test_explicit_titles_are_shortened_not_dropped() -> None:
    doc = parse_document("t.html", f"<title>{'long ' * 60}</title><p>x</p>".encode(), max_bytes=LIMIT)
    assert len(doc.title) <= 120
    assert doc.title.endswith("…")
    assert doc.title.startswith("long long")


def test_normalise_whitespace() -> None:
    text = "  a\u00a0 b\t\tc \r\n d\x07e\n \n\n\n f  \n"
    assert normalise_whitespace(text) == "a b c\nd e\n\nf"


def test_pypdf_is_not_imported_with_the_module() -> None:
    code = "import sys, runtime_ops.documents.parsing; print('pypdf' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
