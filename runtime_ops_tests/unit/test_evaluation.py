"""Golden-set loading, document ranking, retrieval metrics on hand-computed cases, and the report table."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from runtime_ops.models import metrics as evaluation
from runtime_ops.models.golden import GoldenQuestion, evaluable, load_golden_set
from runtime_ops.models.metrics import (
    StreamingRanker,
    evaluate_embedder,
    per_question_metrics,
    rank_documents,
    retrieval_metrics,
)
from runtime_ops.models.report_markdown import comparison_markdown

# -- golden set ---------------------------------------------------------------------------------


def _write(tmp_path: Path, lines: Sequence[str]) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _q(qid: str, relevant: object = ("doc-a",), question: str = "what?") -> str:
    return json.dumps({"id": qid, "question": question, "relevant": list(relevant)})  # type: ignore[call-overload]


def test_load_golden_set_parses_questions_and_skips_blank_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, [_q("q1", ["a", "b", "a"]), "", _q("q2", ["c"], "how?")])
    assert load_golden_set(path) == [
        GoldenQuestion("q1", "what?", ("a", "b")),
        GoldenQuestion("q2", "how?", ("c",)),
    ]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"id": "q3", "question": ', "invalid JSON"),
        ('["not", "an", "object"]', "expected a JSON object"),
        ('{"id": "q3", "relevant": ["a"]}', "missing field 'question'"),
        ('{"id": "q3", "question": "x"}', "missing field 'relevant'"),
        ('{"id": "q3", "question": "x", "relevant": []}', "'relevant' is empty"),
        ('{"id": "q3", "question": "x", "relevant": "doc-a"}', "'relevant' must be a list"),
        ('{"id": "", "question": "x", "relevant": ["a"]}', "'id' must be a non-empty string"),
        ('{"id": "q3", "question": "  ", "relevant": ["a"]}', "'question' must be a non-empty string"),
    ],
)
def test_load_golden_set_errors_name_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    # Line 3 is the bad one; the blank line 2 still counts towards the line number.
    path = _write(tmp_path, [_q("q1"), "", bad_line])
    with pytest.raises(ValueError, match=message) as info:
        load_golden_set(path)
    assert str(info.value).startswith(f"{path}:3: ")


def test_load_golden_set_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, [_q("q1"), _q("q2"), _q("q1")])
    with pytest.raises(ValueError) as info:
        load_golden_set(path)
    assert str(info.value) == f"{path}:3: duplicate id 'q1' (first defined on line 1)"


def test_load_golden_set_rejects_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no questions"):
        load_golden_set(_write(tmp_path, [""]))


def test_evaluable_keeps_answerable_questions_with_narrowed_relevance() -> None:
    questions = [
        GoldenQuestion("q1", "a", ("d1", "gone")),
        GoldenQuestion("q2", "b", ("gone",)),
        GoldenQuestion("q3", "c", ("d2",)),
    ]
    assert evaluable(questions, ["d1", "d2", "d3"]) == [
        GoldenQuestion("q1", "a", ("d1",)),
        GoldenQuestion("q3", "c", ("d2",)),
    ]


# -- metrics -------------------------------------------------------------------------------------


def test_retrieval_metrics_hand_computed() -> None:
    ranked = [["a", "b", "c"], ["x", "y", "z"]]
    relevant = [{"b"}, {"x", "z"}]
    metrics = retrieval_metrics(ranked, relevant, ks=(1, 3))
    # q1: hit at rank 2 -> ndcg@3 = (1/log2 3) / 1;  q2: hits at 1 and 3 -> (1 + 1/2) / (1 + 1/log2 3)
    ndcg3_q1 = 1 / math.log2(3)
    ndcg3_q2 = 1.5 / (1 + 1 / math.log2(3))
    assert metrics == pytest.approx(
        {
            "recall@1": 0.25,  # (0 + 1/2) / 2
            "recall@3": 1.0,
            "ndcg@1": 0.5,  # (0 + 1) / 2: the ideal DCG@1 is one hit
            "ndcg@3": (ndcg3_q1 + ndcg3_q2) / 2,
            "mrr": 0.75,  # (1/2 + 1) / 2
            "questions": 2.0,
        }
    )
    assert metrics["ndcg@3"] == pytest.approx(0.7753252713598226)
    assert list(metrics) == ["recall@1", "recall@3", "ndcg@1", "ndcg@3", "mrr", "questions"]


def test_retrieval_metrics_ideal_dcg_uses_min_of_k_and_relevant() -> None:
    # Three relevant docs but k=2: a perfect top-2 is nDCG 1.0, while recall@2 is capped at 2/3.
    metrics = retrieval_metrics([["a", "b", "x"]], [{"a", "b", "c"}], ks=(2,))
    assert metrics["ndcg@2"] == pytest.approx(1.0)
    assert metrics["recall@2"] == pytest.approx(2 / 3)


def test_retrieval_metrics_misses_and_duplicates() -> None:
    metrics = retrieval_metrics([["x", "y"], ["a", "a", "b"]], [{"a"}, {"b"}], ks=(2,))
    # q1 never hits; in q2 the repeated "a" collapses so "b" is rank 2.
    assert metrics["mrr"] == pytest.approx(0.25)
    assert metrics["recall@2"] == pytest.approx(0.5)
    assert retrieval_metrics([[]], [{"a"}], ks=(1,))["mrr"] == 0.0


@pytest.mark.parametrize(
    ("ranked", "relevant", "ks", "message"),
    [
        ([["a"]], [{"a"}, {"b"}], (1,), "1 rankings for 2"),
        ([], [], (1,), "no questions"),
        ([["a"]], [set()], (1,), "no relevant documents"),
        ([["a"]], [{"a"}], (0,), "positive integers"),
        ([["a"]], [{"a"}], (), "positive integers"),
    ],
)
def test_retrieval_metrics_rejects_bad_input(
    ranked: list[list[str]], relevant: list[set[str]], ks: tuple[int, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        retrieval_metrics(ranked, relevant, ks)


# -- ranking -------------------------------------------------------------------------------------


def _unit(rows: list[list[float]]) -> np.ndarray:
    matrix = np.array(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def test_rank_documents_collapses_chunks_to_best_chunk_per_document() -> None:
    chunks = _unit([[1, 0], [0, 1], [0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    keys = ["doc-b", "doc-b", "doc-a", "doc-c", "doc-c"]  # doc-b's best chunk is the exact match
    queries = _unit([[1, 0], [0, 1]])
    assert rank_documents(queries, chunks, keys, top_k=3) == [
        ["doc-b", "doc-a", "doc-c"],
        ["doc-b", "doc-c", "doc-a"],
    ]
    assert rank_documents(queries, chunks, keys, top_k=1) == [["doc-b"], ["doc-b"]]
    # Asking for more documents than exist returns each document once.
    assert len(rank_documents(queries, chunks, keys, top_k=10)[0]) == 3


def test_rank_documents_edge_cases() -> None:
    chunks = _unit([[1, 0], [0, 1]])
    assert rank_documents(_unit([[0, 0], [1, 0]]), chunks, ["a", "b"], top_k=2) == [[], ["a", "b"]]
    assert rank_documents(np.zeros((2, 2)), np.zeros((0, 2)), [], top_k=3) == [[], []]
    # Equal scores fall back to corpus order, so rankings are reproducible.
    assert rank_documents(_unit([[1, 1]]), chunks, ["b", "a"], top_k=2) == [["b", "a"]]
    with pytest.raises(ValueError, match="top_k"):
        rank_documents(chunks, chunks, ["a", "b"], top_k=0)
    with pytest.raises(ValueError, match="doc keys"):
        rank_documents(chunks, chunks, ["a"], top_k=1)
    with pytest.raises(ValueError, match="dimension mismatch"):
        rank_documents(np.ones((1, 3)), chunks, ["a", "b"], top_k=1)


def test_rank_documents_blocked_matches_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    chunks = _unit(rng.normal(size=(500, 16)).tolist())
    queries = _unit(rng.normal(size=(23, 16)).tolist())
    keys = [f"doc-{rng.integers(0, 120)}" for _ in range(500)]  # interleaved, not grouped
    monkeypatch.setattr(evaluation, "_BLOCK_ELEMENTS", 500 * 4)  # 4 queries per block
    ranked = rank_documents(queries, chunks, keys, top_k=7)

    scores = queries @ chunks.T
    for row, result in enumerate(ranked):
        best: dict[str, float] = {}
        for col, key in enumerate(keys):
            best[key] = max(best.get(key, -np.inf), float(scores[row, col]))
        assert result == sorted(best, key=lambda k: -best[k])[:7]


# -- glue and report -----------------------------------------------------------------------------


class KeywordEmbedder:
    """A fake embedder: one axis per keyword, so the expected ranking is obvious."""

    words = ("bread", "stars", "router")

    def embed(self, texts: Sequence[str], batch_size: int = 512) -> np.ndarray:
        return _unit([[float(word in text) for word in self.words] for text in texts])


def test_evaluate_embedder_scores_only_evaluable_questions() -> None:
    chunk_texts = ["bread recipe", "more bread", "stars at night", "router setup"]
    chunk_keys = ["bake", "bake", "astro", "net"]
    questions = [
        GoldenQuestion("q1", "bread?", ("bake",)),
        GoldenQuestion("q2", "router?", ("net", "missing")),
        # Off-axis for "net": astro first, then the zero-score tie resolved by corpus order (bake, net).
        GoldenQuestion("q3", "stars?", ("net",)),
        GoldenQuestion("q4", "anything", ("not-in-corpus",)),
    ]
    metrics = evaluate_embedder(KeywordEmbedder(), chunk_texts, chunk_keys, questions, ks=(1, 3))
    assert metrics["questions"] == 3.0
    assert metrics["recall@1"] == pytest.approx(2 / 3)
    assert metrics["mrr"] == pytest.approx((1 + 1 + 1 / 3) / 3)

    with pytest.raises(ValueError, match="none of the 1 golden questions"):
        evaluate_embedder(KeywordEmbedder(), chunk_texts, chunk_keys, questions[3:])


def test_comparison_markdown_with_production() -> None:
    table = comparison_markdown(
        {"ndcg@5": 0.534, "mrr": 0.5, "questions": 40.0},
        {"ndcg@5": 0.5, "mrr": 0.52, "questions": 38.0},
        candidate_label="abc123",
        production_label="def456",
    )
    assert table == (
        "| metric | candidate (abc123) | production (def456) | delta |\n"
        "|---|---:|---:|---:|\n"
        "| ndcg@5 | 0.5340 | 0.5000 | +0.0340 |\n"
        "| mrr | 0.5000 | 0.5200 | -0.0200 |\n"
        "| questions | 40 | 38 | +2 |\n"
    )


def test_comparison_markdown_without_production() -> None:
    table = comparison_markdown({"ndcg@5": 0.5}, None, candidate_label="a|b", production_label="none")
    lines = table.splitlines()
    assert lines[0] == "| metric | candidate (a\\|b) | production | delta |"
    assert lines[2] == "| ndcg@5 | 0.5000 | — | — |"
    assert "No production model" in table


# -- per-question metrics and the streaming ranker -----------------------------------------------


def test_per_question_metrics_are_the_per_question_terms_of_the_means() -> None:
    ranked = [["a", "b", "c"], ["x", "y", "z"], []]
    relevant = [{"b"}, {"x", "z"}, {"q"}]
    per_question = per_question_metrics(ranked, relevant, ks=(3, 1, 3))
    assert list(per_question) == ["recall@1", "recall@3", "ndcg@1", "ndcg@3", "mrr"]
    np.testing.assert_allclose(per_question["recall@1"], [0.0, 0.5, 0.0])
    np.testing.assert_allclose(per_question["mrr"], [0.5, 1.0, 0.0])
    np.testing.assert_allclose(per_question["ndcg@3"], [1 / math.log2(3), 1.5 / (1 + 1 / math.log2(3)), 0.0])
    means = retrieval_metrics(ranked, relevant, ks=(1, 3))
    for name, values in per_question.items():
        assert values.dtype == np.float64 and values.shape == (3,)
        assert means[name] == pytest.approx(float(values.mean()))
    assert means["questions"] == 3.0


def test_per_question_metrics_rejects_what_retrieval_metrics_rejects() -> None:
    with pytest.raises(ValueError, match="no questions"):
        per_question_metrics([], [])
    with pytest.raises(ValueError, match="no relevant documents"):
        per_question_metrics([["a"]], [set()])


def _ranker(queries: np.ndarray, batches: list[tuple[np.ndarray, list[str]]], top_k: int) -> list[list[str]]:
    ranker = StreamingRanker(queries, top_k)
    for vecs, keys in batches:
        ranker.add(vecs, keys)
    return ranker.ranked()


@pytest.mark.parametrize("seed", range(40))
def test_streaming_ranker_equals_rank_documents_on_the_concatenation(seed: int) -> None:
    # Small integer vectors: float32 dot products are exact, so scores tie often and the property
    # covers the tie-breaking (first appearance across batches), not just the ordering.
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(1, 5))
    n_chunks = int(rng.integers(0, 60))
    queries = rng.integers(-2, 3, size=(int(rng.integers(0, 9)), dim)).astype(np.float32)
    chunks = rng.integers(-2, 3, size=(n_chunks, dim)).astype(np.float32)
    # Unsorted, repeated keys: a document's chunks are scattered over several batches.
    keys = [f"doc-{rng.integers(0, 1 + n_chunks // 2)}" for _ in range(n_chunks)]
    cuts = np.sort(rng.integers(0, n_chunks + 1, size=int(rng.integers(0, 6))))
    bounds = [0, *cuts.tolist(), n_chunks]
    batches = [(chunks[a:b], keys[a:b]) for a, b in itertools.pairwise(bounds)]
    top_k = int(rng.integers(1, 12))
    expected = rank_documents(queries, chunks, keys, top_k)
    assert _ranker(queries, batches, top_k) == expected


def test_streaming_ranker_matches_on_float_data_with_small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    chunks = _unit(rng.normal(size=(300, 8)).tolist())
    queries = _unit(rng.normal(size=(13, 8)).tolist())
    keys = [f"doc-{rng.integers(0, 70)}" for _ in range(300)]
    monkeypatch.setattr(evaluation, "_BLOCK_ELEMENTS", 40)  # several query blocks per batch
    batches = [(chunks[i : i + 37], keys[i : i + 37]) for i in range(0, 300, 37)]
    streamed = _ranker(queries, batches, 9)
    # Compare against brute force by score (not rank_documents' exact floats, which may differ in
    # the last bit when BLAS picks another kernel for another block shape).
    scores = queries.astype(np.float64) @ chunks.T.astype(np.float64)
    for row, result in enumerate(streamed):
        best: dict[str, float] = {}
        for col, key in enumerate(keys):
            best[key] = max(best.get(key, -np.inf), float(scores[row, col]))
        expected = sorted(best.values(), reverse=True)[:9]
        np.testing.assert_allclose([best[d] for d in result], expected, atol=1e-5)


def test_streaming_ranker_edge_cases_and_memory() -> None:
    chunks = _unit([[1, 0], [0, 1]])
    ranker = StreamingRanker(_unit([[0, 0], [1, 0]]), top_k=2)
    assert ranker.ranked() == [[], []]  # nothing added yet
    ranker.add(np.zeros((0, 2)), [])
    ranker.add(chunks[1:], ["b"])
    ranker.add(chunks[:1], ["a"])
    assert ranker.ranked() == [[], ["a", "b"]]  # zero query: empty ranking
    # Memory is per document, not per chunk: 10k chunks of 3 documents keep 3 columns of state.
    many = StreamingRanker(_unit([[1, 0]]), top_k=5)
    for _ in range(10):
        many.add(np.tile(chunks, (500, 1)), ["x", "y"] * 500)
    many.add(chunks[:1], ["z"])
    assert many.documents == 3
    assert many.ranked() == [["x", "z", "y"]]
    with pytest.raises(ValueError, match="top_k"):
        StreamingRanker(chunks, top_k=0)
    with pytest.raises(ValueError, match="doc keys"):
        ranker.add(chunks, ["a"])
    with pytest.raises(ValueError, match="dimension mismatch"):
        ranker.add(np.ones((1, 3)), ["a"])
    with pytest.raises(ValueError, match="NaN"):
        ranker.add(np.array([[np.nan, 0.0]]), ["a"])
