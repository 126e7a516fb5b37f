"""The extractive answerer: answers are markdown that keeps code blocks whole and carries no markdown debris."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from runtime_ops.demo import CORPUS_DIR, corpus_keys
from runtime_ops.documents.chunking import chunk_text
from runtime_ops.documents.parsing import parse_document
from runtime_ops.markdown import split_fenced
from runtime_ops.serving.answerer import extractive_answer, split_sentences

CODE = 'echo \'{"json":"obj"}\' | python -m json.tool\n\n# the object, indented\n    {"json": "obj"}'


def _words(texts: Sequence[str]) -> np.ndarray:
    """A bag-of-words embedder: each text's vector counts a few marker words."""
    vocab = ["json", "shell", "pretty", "heading", "other"]
    return np.array([[t.lower().count(w) for w in vocab] for t in texts], dtype=float)


def _question(*words: str) -> np.ndarray:
    return _words([" ".join(words)])[0]


def _assert_clean(answer: str) -> None:
    """Every code block whole (opened and closed), no heading marker outside code."""
    for block in split_fenced(answer):
        assert block.opened and block.closed, answer
        if not block.code:
            assert not any(line.lstrip().startswith("#") for line in block.text.splitlines()), answer


def test_a_code_block_is_answered_whole_and_headings_lose_their_markers() -> None:
    intro = "### Pretty JSON from the shell\n\nPipe json into `python -m json.tool` to pretty print."
    passage = f"{intro}\n\n```bash\n{CODE}\n```"
    answer = extractive_answer(_question("json", "shell", "pretty"), [passage], _words)
    assert f"```bash\n{CODE}\n```" in answer
    assert answer.startswith("Pretty JSON from the shell\n\nPipe json into `python -m json.tool` to pretty print.")
    _assert_clean(answer)


def test_a_lone_fence_line_is_never_an_answer() -> None:
    # What the old paragraph splitter made of a block with a blank line: fence lines glued to sentences.
    passage = "```text\nMethods:\n\nconnect(self)\n    Connect to the host json.\n```"
    answer = extractive_answer(_question("json"), [passage], _words)
    assert answer == passage
    assert "```text" not in split_sentences(passage)


def test_a_passage_cut_inside_a_block_gets_its_block_closed_or_opened() -> None:
    ends_open = "Pretty json from the shell:\n\n```bash\necho '{}' | python -m json.tool"
    answer = extractive_answer(_question("json", "shell"), [ends_open], _words)
    assert answer.endswith("```bash\necho '{}' | python -m json.tool\n```")
    starts_inside = "    print(json.dumps(x) | y)\n```\n\nThat prints the json of x to the shell."
    answer = extractive_answer(_question("json", "shell"), [starts_inside], _words)
    assert answer.startswith("```\n    print(json.dumps(x) | y)\n```")
    _assert_clean(answer)


def test_a_long_code_answer_is_cut_between_lines_and_stays_a_block() -> None:
    lines = [f"json_step_{i}() | tee shell_{i}.log" for i in range(60)]
    passage = "```sh\n" + "\n".join(lines) + "\n```"
    answer = extractive_answer(_question("json"), [passage], _words, max_chars=300)
    code = answer.split("```sh\n", 1)[1].split("\n```", 1)[0].split("\n")
    assert code == lines[: len(code)] and 0 < len(code) < len(lines)
    _assert_clean(answer)


def test_answers_from_every_shipped_chunk_are_clean() -> None:
    rng = np.random.default_rng(0)

    def embed(texts: Sequence[str]) -> np.ndarray:
        return rng.normal(size=(len(texts), 8))

    for key in corpus_keys():
        if not key.endswith(".md"):
            continue
        text = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 * 1024 * 1024).text
        for chunk in chunk_text(text):
            _assert_clean(extractive_answer(rng.normal(size=8), [chunk], embed))
