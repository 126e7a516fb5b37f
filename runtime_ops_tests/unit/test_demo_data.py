from __future__ import annotations

import collections
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from runtime_ops.demo import CORPUS_DIR, GOLDEN_SET, QUESTIONS, corpus_keys, corpus_subset, land_corpus
from runtime_ops.demo.build_corpus import CORPUS
from runtime_ops.demo.pdf import minimal_pdf
from runtime_ops.documents.parsing import parse_document
from runtime_ops.landing import LocalLandingSource, UnsafePath

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
KEYS = corpus_keys()


def _golden() -> list[dict]:
    return [json.loads(line) for line in GOLDEN_SET.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- the shipped corpus ------------------------------------------------------------------------------


def test_corpus_is_a_small_mix_of_formats_in_sub_folders() -> None:
    sizes = {key: (CORPUS_DIR / key).stat().st_size for key in KEYS}
    formats = collections.Counter(Path(key).suffix for key in KEYS)
    assert 40 <= len(KEYS) <= 80
    assert sum(sizes.values()) < 1_500_000
    assert max(sizes.values()) < 40_000
    assert set(formats) == {".md", ".txt", ".html", ".json", ".jsonl", ".pdf"}
    assert formats[".pdf"] >= 2
    assert all(key.startswith("stdlib/") and key.count("/") == 2 for key in KEYS)


def test_corpus_matches_the_build_table() -> None:
    # A file added to or dropped from the table without regenerating the corpus shows up here.
    assert sorted(item.key for item in CORPUS) == KEYS


@pytest.mark.parametrize("key", KEYS)
def test_every_shipped_document_parses(key: str) -> None:
    doc = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=DEFAULT_MAX_BYTES)
    assert len(doc.text) > 500
    assert " — " in doc.title  # the hand-written "module — summary" titles, whatever the format


def test_corpus_has_no_machine_specific_content() -> None:
    for key in KEYS:
        if key.endswith(".pdf"):
            continue
        text = (CORPUS_DIR / key).read_text(encoding="utf-8")
        assert " at 0x" not in text, key
        assert sys.prefix not in text and sys.base_prefix not in text, key


def test_build_is_deterministic_across_processes(tmp_path: Path) -> None:
    # Different hash seeds and address layouts must not leak into the output.
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run(
            [sys.executable, "-m", "runtime_ops.demo.build_corpus", str(out)],
            check=True,
            capture_output=True,
            env=env,
        )
        outputs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()})
    assert outputs[0] == outputs[1]
    assert sorted(outputs[0]) == KEYS


# --- golden set and questions ------------------------------------------------------------------------


def test_golden_set_shape() -> None:
    rows = _golden()
    assert 35 <= len(rows) <= 60
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids)
    for row in rows:
        assert row["question"].strip().endswith("?")
        assert row["relevant"] and len(set(row["relevant"])) == len(row["relevant"])


def test_golden_keys_exist_in_the_shipped_corpus() -> None:
    missing = [(row["id"], key) for row in _golden() for key in row["relevant"] if key not in KEYS]
    assert missing == []


def test_golden_relevant_documents_contain_the_evidence() -> None:
    # Guards against a regenerated corpus that trims away the very passage a question is about.
    texts: dict[str, str] = {}
    for row in _golden():
        for key in row["relevant"]:
            if key not in texts:
                texts[key] = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=DEFAULT_MAX_BYTES).text
            assert row["evidence"] in texts[key], (row["id"], key)


def test_golden_set_covers_every_format() -> None:
    formats = {Path(key).suffix for row in _golden() for key in row["relevant"]}
    assert formats == {".md", ".txt", ".html", ".json", ".jsonl", ".pdf"}


def test_example_questions() -> None:
    lines = QUESTIONS.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5
    assert all(line.strip() == line and line.endswith("?") for line in lines)


# --- land_corpus ---------------------------------------------------------------------------------------


def test_land_corpus_lands_everything_byte_for_byte(tmp_path: Path) -> None:
    landed = land_corpus(LocalLandingSource(tmp_path / "landing"))
    assert landed == KEYS
    for key in KEYS:
        path = (tmp_path / "landing").joinpath(*key.split("/"))
        assert path.read_bytes() == (CORPUS_DIR / key).read_bytes()
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p for p in (tmp_path / "landing").rglob(".*")] == []  # no temp file left behind


def test_land_corpus_overwrites_existing_files(tmp_path: Path) -> None:
    target = tmp_path.joinpath(*KEYS[0].split("/"))
    target.parent.mkdir(parents=True)
    target.write_bytes(b"stale")
    land_corpus(LocalLandingSource(tmp_path))
    assert target.read_bytes() == (CORPUS_DIR / KEYS[0]).read_bytes()


def test_land_corpus_only_missing_lands_the_rest_once(tmp_path: Path) -> None:
    landing = LocalLandingSource(tmp_path)
    first = land_corpus(landing, subset=0.7)
    before = {k: tmp_path.joinpath(k).stat().st_mtime_ns for k in first}
    rest = land_corpus(landing, only_missing=True)
    assert len(first) + len(rest) == len(KEYS) and not set(first) & set(rest)
    assert {k: tmp_path.joinpath(k).stat().st_mtime_ns for k in first} == before, "landed documents are not touched"
    assert land_corpus(landing, only_missing=True) == []


def test_corpus_subset_is_deterministic_and_spread() -> None:
    first = corpus_subset(0.25)
    assert first == corpus_subset(0.25)
    assert len(first) == -(-len(KEYS) // 4)
    assert len({key.rsplit("/", 2)[-2] for key in first}) >= 5  # not just the first folder alphabetically
    assert len(corpus_subset(0.0001)) == 1


@pytest.mark.parametrize("subset", [0, -0.5, 1.5])
def test_corpus_subset_rejects_bad_fractions(subset: float) -> None:
    with pytest.raises(ValueError, match="subset must be a fraction in \\(0, 1\\]"):
        corpus_subset(subset)


def test_land_corpus_never_writes_through_a_link_in_the_landing(tmp_path: Path) -> None:
    """The demo lands through the landing's own confined writes: a folder link inside the landing (to a folder
    outside it) is refused, and nothing appears outside."""
    outside, landing = tmp_path / "outside", tmp_path / "landing"
    outside.mkdir()
    landing.mkdir()
    (landing / KEYS[0].split("/")[0]).symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath):
        land_corpus(LocalLandingSource(landing))
    assert list(outside.rglob("*")) == []


# --- minimal_pdf ---------------------------------------------------------------------------------------


def test_minimal_pdf_is_valid_in_strict_mode_with_correct_xref() -> None:
    from pypdf import PdfReader

    data = minimal_pdf(["First (page) with \\ backslash", "Second page"], title="Tïtle ✓")
    reader = PdfReader(io.BytesIO(data), strict=True)
    assert len(reader.pages) == 2
    assert reader.metadata is not None and reader.metadata.title == "Tïtle ✓"
    assert reader.pages[0].extract_text().strip() == "First (page) with \\ backslash"
    # Every xref offset must point at the start of its object.
    xref_at = int(data.rsplit(b"startxref\n", 1)[1].split(b"\n", 1)[0])
    entries = data[xref_at:].split(b"\n")[3:]
    size = cast(int, reader.trailer["/Size"])  # a NumberObject (an int)
    for number, entry in enumerate(entries[: size - 1], start=1):
        offset = int(entry[:10])
        assert data[offset:].startswith(b"%d 0 obj" % number)


def test_minimal_pdf_wraps_long_lines_and_overflows_onto_new_pages() -> None:
    from pypdf import PdfReader

    text = "\n".join(f"Line {i} " + "word " * 30 for i in range(120))
    reader = PdfReader(io.BytesIO(minimal_pdf([text])))
    assert len(reader.pages) > 2
    extracted = "\n".join(page.extract_text() for page in reader.pages)
    assert "Line 0 " in extracted and "Line 119 " in extracted
    assert extracted.split() == text.split()


def test_minimal_pdf_replaces_characters_the_font_cannot_show() -> None:
    doc = parse_document("x.pdf", minimal_pdf(["café € 日本"]), max_bytes=DEFAULT_MAX_BYTES)
    assert doc.text == "café € ??"
