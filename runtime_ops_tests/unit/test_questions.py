"""Generated evaluation questions: determinism, selection stability, methods, holdout split, set version, mixing."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import runtime_ops
from runtime_ops.demo import CORPUS_DIR, corpus_keys
from runtime_ops.documents.chunk_profiles import chunker
from runtime_ops.documents.parsing import parse_document
from runtime_ops.embedders.token_counts import declared_profile
from runtime_ops.models.golden import GoldenQuestion
from runtime_ops.models.questions import (
    GeneratedQuestion,
    combine,
    generate_questions,
    provenance_mix,
    question_set_version,
    reads_as_words,
    split_holdout,
)
from runtime_ops.pipeline.attributes import PipelineAttributes
from runtime_ops.pipeline.resolve import resolve_spec
from runtime_ops.settings import load_settings

_VOCABULARY = """
scheduler retries pipeline backfill partition sensor webhook landing bucket embedding model registry
canary rollback approval digest ledger corpus chunk tokenizer latency throughput quota tenant
migration schema index vector cosine shard replica failover alert threshold dashboard
"""
_WORDS = _VOCABULARY.split()


def _doc(doc: int, chunks: int = 3) -> list[tuple[int, str, str]]:
    """A Markdown document of a few chunks, each a distinctive heading plus prose sentences."""
    rng = random.Random(doc)
    rows = []
    for c in range(chunks):
        sentences = []
        for _ in range(4):
            words = rng.sample(_WORDS, 9)
            sentences.append(f"The {words[0]} {' '.join(words[1:5])} for the {' '.join(words[5:])} v{doc}.{c}.")
        heading = f"## {rng.choice(_WORDS).title()} {rng.choice(_WORDS)} {doc}-{c}"
        rows.append((doc * 100 + c, f"doc-{doc}", heading + "\n\n" + " ".join(sentences)))
    return rows


def _corpus(docs: range) -> list[tuple[int, str, str]]:
    return [row for d in docs for row in _doc(d)]


def test_same_corpus_and_seed_give_the_same_questions_whatever_the_input_order() -> None:
    corpus = _corpus(range(30))
    first = generate_questions(corpus, n=25, seed=1)
    shuffled = corpus[:]
    random.Random(5).shuffle(shuffled)
    assert generate_questions(iter(shuffled), n=25, seed=1) == first
    assert len(first) == 25
    assert len({q.id for q in first}) == 25
    assert len({q.question.lower() for q in first}) == 25
    # Another seed selects another sample.
    assert {q.id for q in generate_questions(corpus, n=25, seed=2)} != {q.id for q in first}


def test_fewer_questions_are_a_prefix_of_more() -> None:
    corpus = _corpus(range(30))
    assert generate_questions(corpus, n=7) == generate_questions(corpus, n=40)[:7]


def test_adding_documents_only_displaces_questions() -> None:
    old = generate_questions(_corpus(range(30)), n=20)
    new = generate_questions(_corpus(range(40)), n=20)
    from_old_docs = [q for q in new if int(q.relevant[0].split("-")[1]) < 30]
    # The old documents' questions keep their order and ids; new documents only push some out.
    assert from_old_docs == old[: len(from_old_docs)]
    assert len(from_old_docs) >= 10


def test_the_corpus_is_streamed_once() -> None:
    consumed = []

    def stream() -> Iterator[tuple[int, str, str]]:
        for row in _corpus(range(50)):
            consumed.append(row[0])
            yield row

    assert len(generate_questions(stream(), n=5)) == 5
    assert len(consumed) == 150


def test_provenance_ids_and_relevance() -> None:
    corpus = _corpus(range(10))
    by_id = {row[0]: row for row in corpus}
    for question in generate_questions(corpus, n=30):
        provenance = question.provenance
        chunk_id, doc_key, text = by_id[int(provenance["chunk_id"])]
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        assert provenance == {
            "method": provenance["method"],
            "chunk_id": chunk_id,
            "doc_key": doc_key,
            "chunk_sha256": digest,
        }
        assert question.id == f"gen-{provenance['method']}-{digest}"
        assert question.relevant == (doc_key,)
        assert isinstance(question, GoldenQuestion)
    assert set(provenance_mix(generate_questions(corpus, n=30))) == {"heading", "inverse_cloze"}


def test_inverse_cloze_query_is_content_words_with_some_dropped() -> None:
    text = (
        "Deploys happen on Tuesdays. "
        "The scheduler retries failed backfill partitions three times before paging the on-call engineer. "
        "It is fine."
    )
    [question] = generate_questions([(1, "runbook", text)], n=5, min_chunk_chars=10, methods=("inverse_cloze",))
    content = [
        "scheduler",
        "retries",
        "failed",
        "backfill",
        "partitions",
        "three",
        "times",
        "paging",
        "on-call",
        "engineer",
    ]
    words = question.question.split()
    assert len(words) == len(content) - len(content) // 4  # a quarter of the content words dropped
    assert words == [w for w in content if w in words]  # in order, no stopwords
    assert question.question not in text
    no_drop = generate_questions([(1, "runbook", text)], n=1, min_chunk_chars=10, drop_fraction=0.0)
    assert [q.question for q in no_drop if q.provenance["method"] == "inverse_cloze"] == [" ".join(content)]


def test_heading_method_skips_code_fences_and_generic_headings() -> None:
    text = (
        "# Overview\n\n"
        "```bash\n# Restart the whole cluster now\nkubectl rollout restart\n```\n\n"
        "## Rotating the **webhook** signing [secret](https://example.com/x)\n\n"
        "Short text.\n"
    )
    [question] = generate_questions([(7, "ops", text)], n=3, min_chunk_chars=10)
    assert question.question == "Rotating the webhook signing secret"
    assert question.provenance["method"] == "heading"
    [api] = generate_questions(
        [(8, "api", "## The `capture_output` flag of _subprocess.run_\n")], n=1, min_chunk_chars=1
    )
    assert api.question == "The capture_output flag of subprocess.run"


def test_short_and_unusable_chunks_are_skipped() -> None:
    short = (1, "a", "## Rotating signing keys\n\nThe scheduler retries failed partitions three times.")
    code_only = (2, "b", "```\n" + "x = compute(y)\n" * 40 + "```\n")
    tables = (3, "c", "| col | other |\n" * 30)
    assert generate_questions([short, code_only, tables], n=5) == []
    assert len(generate_questions([short], n=5, min_chunk_chars=10)) == 2


def test_ambiguous_questions_are_dropped_and_same_document_duplicates_kept_once() -> None:
    shared = _doc(1, chunks=1)[0][2]
    corpus = [(1, "doc-1", shared), (2, "doc-2", shared), *_doc(3, chunks=1)]
    questions = generate_questions(corpus, n=10)
    assert {q.relevant for q in questions} == {("doc-3",)}  # doc-1 and doc-2 answer the same questions
    twice = generate_questions([(5, "doc-1", shared), (4, "doc-1", shared)], n=10)
    assert len(twice) == 2
    assert {q.provenance["chunk_id"] for q in twice} == {4}  # the smallest source wins, whatever the order


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"n": 0}, "n must be"), ({"n": 1, "methods": ("llm",)}, "methods"), ({"n": 1, "drop_fraction": 1.0}, "drop")],
)
def test_generate_questions_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        generate_questions([], **kwargs)


# -- holdout, version, mix, combine ---------------------------------------------------------------


def _golden(count: int, prefix: str = "q") -> list[GoldenQuestion]:
    return [GoldenQuestion(f"{prefix}{i}", f"question {prefix} {i}?", (f"doc-{i}",)) for i in range(count)]


def test_split_holdout_is_deterministic_stable_and_near_the_fraction() -> None:
    questions = _golden(1000)
    train, holdout = split_holdout(questions, 0.3, seed=4)
    assert split_holdout(questions, 0.3, seed=4) == (train, holdout)
    assert 250 < len(holdout) < 350
    assert sorted(q.id for q in train + holdout) == sorted(q.id for q in questions)
    assert train == [q for q in questions if q in train]  # input order kept
    # Growing the set never moves an existing question to the other side.
    grown_train, grown_holdout = split_holdout(questions + _golden(200, "new"), 0.3, seed=4)
    assert set(q.id for q in holdout) <= set(q.id for q in grown_holdout)
    assert set(q.id for q in train) <= set(q.id for q in grown_train)
    assert split_holdout(questions, 0.0)[1] == [] and split_holdout(questions, 1.0)[0] == []
    with pytest.raises(ValueError):
        split_holdout(questions, 1.5)


def test_question_set_version_ignores_order_and_provenance_but_not_content() -> None:
    questions = _golden(5)
    version = question_set_version(questions)
    assert len(version) == 64
    assert question_set_version(reversed(questions)) == version
    tagged = [GeneratedQuestion(q.id, q.question, q.relevant, {"method": "reviewed"}) for q in questions]
    assert question_set_version(tagged) == version
    edited = [*questions[:4], GoldenQuestion("q4", "question q 4?", ("doc-9",))]
    assert question_set_version(edited) != version
    assert question_set_version(questions[:4]) != version
    with pytest.raises(ValueError, match="duplicate question ids: q1"):
        question_set_version([*questions, questions[1]])


def test_provenance_mix_and_combine() -> None:
    reviewed = _golden(3, "r")
    generated = generate_questions(_corpus(range(10)), n=10)
    # A generated question repeating a reviewed question's text is not added twice.
    echo = GeneratedQuestion("gen-x", "Question R 1?", ("doc-1",), {"method": "heading"})
    combined = combine(reviewed, [echo, *generated], min_questions=8)
    assert [q.id for q in combined[:3]] == ["r0", "r1", "r2"]
    assert combined[0].provenance == {"method": "reviewed"}
    assert combined[3:] == generated[:5]
    assert sum(provenance_mix(combined).values()) == 8
    assert provenance_mix(combined)["reviewed"] == 3
    assert provenance_mix(reviewed) == {"reviewed": 3}
    # Enough reviewed questions: nothing generated is added, and reviewed ones are never cut.
    assert combine(reviewed, generated, min_questions=2) == combine(reviewed, [], min_questions=0)
    assert len(combine(reviewed, generated, min_questions=2)) == 3
    with pytest.raises(ValueError):
        combine(reviewed, generated, min_questions=-1)


@pytest.mark.parametrize("seed", range(5))
def test_bounded_selection_matches_an_unbounded_one_with_duplicates_and_shuffles(seed: int) -> None:
    # Chunks copied between documents (ambiguous) and within one (kept once), in random order:
    # the bounded heap must still pick the n smallest-key unambiguous questions.
    rng = random.Random(seed)
    corpus = _corpus(range(40))
    copies = [(10_000 + i, f"doc-{rng.randrange(40)}", rng.choice(corpus)[2]) for i in range(60)]
    rows = corpus + copies
    rng.shuffle(rows)
    unbounded = generate_questions(rows, n=10_000, seed=seed)
    for n in (1, 4, 15):
        assert generate_questions(rows, n=n, seed=seed) == unbounded[:n]
        rng.shuffle(rows)


# -- questions read as words ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "stdev 1.5 2.5 2.75 4.75 1.0810874155219827",  # the example
        "list 1 3 5 7 0 2 4 8 10 15",
        "x00 x01 x02 x03 x05 x06 x07 x0b x0c x0e x0f",
        "prec 28 Emin 425000000 Emax",
        "10 ms 20 ms 50 ms",
        "3.14 kg/m2",
        "",
    ],
)
def test_numeric_text_does_not_read_as_words(text: str) -> None:
    assert not reads_as_words(text)


@pytest.mark.parametrize(
    "text",
    [
        "rotate the signing keys",
        "random.gauss(mu=0.0, sigma=1.0)",
        "interpreted two data interval 1.5-2.5 three 2.5-3.5 one 3.5-4.5",
        "Python 3.11 release notes",
    ],
)
def test_prose_identifiers_and_some_numbers_read_as_words(text: str) -> None:
    assert reads_as_words(text)


def test_a_numeric_sentence_gives_way_to_the_chunks_next_best_one() -> None:
    # The value list is the most "salient" sentence (numbers weigh extra) but does not read as words.
    text = (
        "## 12 34 56\n\n"
        "Values 1.5 2.5 2.75 4.75 1.0810874155219827 3.25 9.5 7.75 are listed here 12 14 16.\n"
        "The scheduler retries a failed partition after the configured backoff interval expires."
    )
    [question] = generate_questions([(1, "doc", text)], n=5, min_chunk_chars=10)
    assert question.provenance["method"] == "inverse_cloze"
    assert "scheduler" in question.question and reads_as_words(question.question)


def test_no_generated_question_of_the_demo_corpus_is_numeric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path))
    defs = Path(runtime_ops.__file__).parent / "defs" / "demo" / "defs.yaml"
    attrs = PipelineAttributes.model_validate(yaml.safe_load(defs.read_text(encoding="utf-8"))["attributes"])
    spec = resolve_spec(attrs, load_settings(), base_dir=defs.parent)
    cut = chunker(declared_profile(spec.embedder, spec.chunking))
    chunks = [
        (i, key, piece)
        for i, (key, piece) in enumerate(
            (key, piece)
            for key in corpus_keys()
            for piece in cut(parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 << 20).text)
        )
    ]
    generated = generate_questions(chunks, n=len(chunks), seed=spec.evaluation.seed)
    assert len(generated) > 300  # nearly every chunk still gives a question
    assert [q.question for q in generated if not reads_as_words(q.question)] == []
    # Not vacuous: the demo corpus has chunks that are mostly values, whose salient sentence does not read as words.
    numeric = [piece for _, _, piece in chunks if any(not reads_as_words(s) for s in piece.split("\n") if len(s) > 20)]
    assert numeric
