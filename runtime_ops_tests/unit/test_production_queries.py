"""The production-queries builder (logged queries + feedback -> questions) and how the report shows the set: one
question per normalised query, relevant documents deduplicated, a not_helpful taking its own item away, the content
and its digest independent of the order feedback arrived in."""

from __future__ import annotations

import hashlib
import random

import numpy as np

from runtime_ops.models.golden import GoldenQuestion
from runtime_ops.models.production_queries import METHOD, Judgement, production_questions, question_id
from runtime_ops.models.question_set import QuestionSet, SetQuestion
from runtime_ops.models.report_markdown import comparison_markdown
from runtime_ops.models.scoring import Scored
from runtime_ops.online.hashing import normalise_query


def _j(request: str, text: str, chunk: int, key: str, signal: str) -> Judgement:
    return Judgement(request, text, chunk, key, signal)


def _digest(questions: list[GoldenQuestion]) -> str:
    qs = QuestionSet([SetQuestion(q, {"method": METHOD}, False) for q in questions])
    return hashlib.sha256(qs.to_bytes()).hexdigest()


FEEDBACK = [
    # Two spellings of one query, asked in two requests: one question, its documents the union, each once.
    _j("q_a", "How do I  Export?", 11, "export.md", "click"),
    _j("q_a", "How do I  Export?", 11, "export.md", "helpful"),
    _j("q_a", "How do I  Export?", 12, "export.md", "click"),  # another chunk of the same document
    _j("q_b", "how do i export?", 31, "formats.md", "helpful"),
    # Clicked, then judged not helpful: that item is taken away; only a click remains for nothing else.
    _j("q_c", "csv dialect", 40, "csv.md", "click"),
    _j("q_c", "csv dialect", 40, "csv.md", "not_helpful"),
    _j("q_c", "csv dialect", 41, "sniffer.md", "click"),
    # Only a not_helpful: no question.
    _j("q_d", "json indent", 50, "json.md", "not_helpful"),
]


def test_each_distinct_query_is_one_question_with_its_helpful_and_clicked_documents() -> None:
    questions = production_questions(FEEDBACK)
    assert questions == sorted(
        [
            GoldenQuestion(question_id("how do i export?"), "how do i export?", ("export.md", "formats.md")),
            GoldenQuestion(question_id("csv dialect"), "csv dialect", ("sniffer.md",)),
        ],
        key=lambda q: q.id,
    )
    assert normalise_query("How do I  Export?") == "how do i export?"


def test_a_not_helpful_removes_only_its_own_item() -> None:
    # Another request of the same query found csv.md helpful: that judgement stands.
    questions = production_questions([*FEEDBACK, _j("q_e", "CSV dialect", 40, "csv.md", "helpful")])
    [csv] = [q for q in questions if q.question == "csv dialect"]
    assert csv.relevant == ("csv.md", "sniffer.md")
    # A not_helpful arriving before the click still takes that item away.
    only = production_questions([_j("q_f", "x y", 1, "a.md", "not_helpful"), _j("q_f", "x y", 1, "a.md", "click")])
    assert only == []


def test_unknown_signals_and_empty_texts_make_no_question() -> None:
    assert production_questions([_j("q_g", "   ", 1, "a.md", "helpful"), _j("q_h", "real", 2, "b.md", "skip")]) == []


def test_content_and_digest_do_not_depend_on_the_order_feedback_arrived_in() -> None:
    expected = production_questions(FEEDBACK)
    shuffled = list(FEEDBACK)
    for seed in range(5):
        random.Random(seed).shuffle(shuffled)
        # The order of a not_helpful and its click may swap too: the result is the same.
        assert production_questions(shuffled) == expected
        assert _digest(production_questions(shuffled)) == _digest(expected)
    # A change of content is a new version: one more relevant document.
    grown = production_questions([*FEEDBACK, _j("q_i", "json indent", 51, "pretty.md", "click")])
    assert _digest(grown) != _digest(expected) and len(grown) == 3


def test_the_comparison_table_gives_the_set_beside_rows_of_its_own() -> None:
    md = comparison_markdown(
        {"ndcg@10": 0.8, "questions": 40.0},
        {"ndcg@10": 0.7, "questions": 40.0},
        candidate_label="candidate v2",
        production_label="production v1",
        beside={"production queries": ({"ndcg@10": 0.55, "questions": 21.0}, {"ndcg@10": 0.6, "questions": 21.0})},
    )
    rows = md.splitlines()[2:]
    assert rows == [
        "| ndcg@10 | 0.8000 | 0.7000 | +0.1000 |",
        "| questions | 40 | 40 | +0 |",
        "| production queries: ndcg@10 | 0.5500 | 0.6000 | -0.0500 |",
        "| production queries: questions | 21 | 21 | +0 |",
    ]


def test_sets_scored_together_are_read_apart() -> None:
    a, b, c = (GoldenQuestion(x, x, (f"{x}.md",)) for x in "abc")
    scored = Scored([a, b, c], [["a.md"], ["x.md"], ["c.md"]], {"mrr": np.array([1.0, 0.0, 0.5])}, chunks=9)
    gating = scored.subset([a, b])
    beside = scored.subset([c])
    assert gating is not None and beside is not None
    assert (gating.questions, gating.means) == ([a, b], {"mrr": 0.5, "questions": 2.0})
    assert (beside.questions, beside.ranked, beside.means) == ([c], [["c.md"]], {"mrr": 0.5, "questions": 1.0})
    assert scored.subset([GoldenQuestion("d", "d", ("d.md",))]) is None
