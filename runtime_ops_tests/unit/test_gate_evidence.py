"""What an approver reads of the offline evidence: the verdict's words for each case of the gate's rule, and the
questions whose results changed most (better/worse/same, the relevant document's rank under both models)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runtime_ops.policies.bootstrap import Interval
from runtime_ops.policies.changed_questions import ChangedQuestion, RelevantRank, changed_questions
from runtime_ops.policies.gate_policy import GatePolicy
from runtime_ops.policies.gate_rule import judge_interval, outcome_of
from runtime_ops.policies.gate_text import Outcome, changed_lines, outcome_words, verdict_parts

POLICY = GatePolicy()  # ndcg@5, margin 0.02, max regression 0.05


def _interval(low: float, high: float, mean: float | None = None, n: int = 120) -> Interval:
    return Interval((low + high) / 2 if mean is None else mean, low, high, n, 2000, 0.95)


def test_the_issues_verdict_reads_better_but_below_the_margin() -> None:
    # A newcomer approving v2 saw this labelled "inconclusive": the whole interval is above 0.
    verdict = judge_interval(_interval(0.085, 0.164, 0.124), GatePolicy(auto_approve_margin=1.0))
    assert verdict.outcome is Outcome.BETTER_BELOW_MARGIN
    assert (verdict.meets_policy, verdict.auto_approve) == (True, False)
    assert verdict.reason == (
        "better, but below the auto-approve margin +1.000: ndcg@5 +0.124 [95% CI +0.085, +0.164] over 120 "
        "questions; needs human approval"
    )
    assert "inconclusive" not in verdict.reason
    assert verdict.to_dict()["outcome"] == "better_below_margin"


@pytest.mark.parametrize(
    ("low", "high", "outcome", "meets_policy", "auto_approve", "words"),
    [
        (0.03, 0.09, Outcome.CLEARS_MARGIN, True, True, "better by at least the auto-approve margin +0.020"),
        (0.005, 0.04, Outcome.BETTER_BELOW_MARGIN, True, False, "better, but below the auto-approve margin +0.020"),
        (-0.01, 0.04, Outcome.NO_DIFFERENCE, True, False, "no detectable difference (the interval covers 0)"),
        (-0.04, -0.01, Outcome.WORSE_WITHIN_LIMIT, True, False, "worse, but not beyond the allowed regression -0.050"),
        (-0.09, -0.06, Outcome.WORSE_BEYOND_LIMIT, False, False, "worse beyond the allowed regression -0.050"),
    ],
)
def test_each_case_has_its_words_and_keeps_its_machine_status(
    low: float, high: float, outcome: Outcome, meets_policy: bool, auto_approve: bool, words: str
) -> None:
    verdict = judge_interval(_interval(low, high), POLICY)
    assert verdict.outcome is outcome
    assert (verdict.meets_policy, verdict.auto_approve) == (meets_policy, auto_approve)
    assert verdict.reason.startswith(words + ": ndcg@5 ")
    assert outcome_words(outcome, margin=0.02, max_regression=0.05) == words


def test_case_boundaries() -> None:
    assert outcome_of(0.02, 0.05, POLICY) is Outcome.CLEARS_MARGIN  # lower bound exactly at the margin
    assert outcome_of(0.62 - 0.60, 0.05, POLICY) is Outcome.CLEARS_MARGIN  # ... despite float noise
    assert outcome_of(0.0, 0.05, POLICY) is Outcome.NO_DIFFERENCE  # an interval touching 0 covers it
    assert outcome_of(-0.05, 0.0, POLICY) is Outcome.NO_DIFFERENCE
    assert outcome_of(-0.09, -0.05, POLICY) is Outcome.WORSE_WITHIN_LIMIT  # upper bound exactly at the limit
    assert outcome_of(-0.09, -0.051, POLICY) is Outcome.WORSE_BEYOND_LIMIT
    # A margin of 0 asks only for "not worse": an interval starting at 0 clears it.
    assert outcome_of(0.0, 0.0, GatePolicy(auto_approve_margin=0.0)) is Outcome.CLEARS_MARGIN


# -- changed questions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Q:
    id: str
    question: str
    relevant: tuple[str, ...]


def test_changed_questions_say_better_or_worse_with_the_relevant_documents_rank() -> None:
    questions = [
        _Q("q-up", "how do I rotate keys", ("guide/a.md",)),
        _Q("q-down", "what is a lease", ("guide/b.md",)),
        _Q("q-same", "unchanged results", ("guide/c.md",)),
        _Q("q-set", "same score, other neighbours", ("guide/d.md",)),
        _Q("q-small", "a small gain", ("guide/e.md", "guide/f.md")),
    ]
    prod = [
        ["x1", "x2", "x3", "x4", "x5", "x6", "guide/a.md"],
        ["guide/b.md", "y1"],
        ["guide/c.md", "z"],
        ["guide/d.md", "w1", "w2"],
        ["e1", "guide/e.md"],
    ]
    cand = [
        ["x1", "guide/a.md", "x2"],
        ["y1", "y2"],
        ["guide/c.md", "z"],
        ["guide/d.md", "v1", "v2"],
        ["guide/e.md", "e1"],
    ]
    prod_scores = [0.1, 1.0, 0.7, 0.8, 0.6]
    cand_scores = [0.6, 0.0, 0.7, 0.8, 0.7]
    changed = changed_questions(cand, prod, questions, cand_scores, prod_scores, depth=10)
    # The biggest loss beside the biggest gain, then the next gain; "same" (set changed, score did not) last;
    # q-same changed neither and is left out.
    assert [(c.id, c.direction) for c in changed] == [
        ("q-down", "worse"),
        ("q-up", "better"),
        ("q-small", "better"),
        ("q-set", "same"),
    ]
    up = changed[1]
    assert up == ChangedQuestion(
        "q-up", "how do I rotate keys", "better", 0.5, up.change, 10, (RelevantRank("guide/a.md", 7, 2),)
    )
    assert changed[0].relevant == (RelevantRank("guide/b.md", 1, None),)
    # Several relevant documents: the best ranked first; one ranked by neither model comes last.
    assert [r.document for r in changed[2].relevant] == ["guide/e.md", "guide/f.md"]
    assert changed[2].relevant[1] == RelevantRank("guide/f.md", None, None)
    assert changed[0].to_dict() == {
        "id": "q-down",
        "question": "what is a lease",
        "direction": "worse",
        "delta": -1.0,
        "change": changed[0].change,
        "depth": 10,
        "relevant": [{"document": "guide/b.md", "production": 1, "candidate": None}],
    }
    assert [c.id for c in changed_questions(cand, prod, questions, cand_scores, prod_scores, limit=2)] == [
        "q-down",
        "q-up",
    ]
    with pytest.raises(ValueError, match="scores"):
        changed_questions(cand, prod, questions, cand_scores[:1], prod_scores)
    with pytest.raises(ValueError, match="limit"):
        changed_questions(cand, prod, questions, cand_scores, prod_scores, limit=0)


def test_changed_lines_read_direction_question_and_ranks() -> None:
    questions = [_Q("q1", "how do I rotate keys", ("guide/a.md",)), _Q("q2", "what is a lease", ("guide/b.md",))]
    changed = [
        c.to_dict()
        for c in changed_questions(
            [["guide/a.md"], ["y"]], [["x", "guide/a.md"], ["guide/b.md"]], questions, [1.0, 0.0], [0.6, 1.0]
        )
    ]
    assert changed_lines(changed) == [
        "worse: “what is a lease” — guide/b.md: 1 → not in top 10",
        "better: “how do I rotate keys” — guide/a.md: 2 → 1",
    ]
    # Slack's compact lines: a long question is shortened, one relevant document is named with a count of the rest.
    long = {
        **changed[1],
        "question": "word " * 40,
        "relevant": [
            {"document": "guide/a.md", "production": 3, "candidate": 1},
            {"document": "guide/z.md", "production": None, "candidate": 4},
        ],
    }
    [line] = changed_lines([long], compact=True)
    assert line.startswith("better: “word word") and "…”" in line
    assert line.endswith("— guide/a.md: 3 → 1 (+1 more relevant)")
    assert changed_lines([long])[0].endswith("— guide/a.md: 3 → 1; guide/z.md: not in top 10 → 4")
    assert changed_lines(changed, limit=1) == changed_lines(changed)[:1]
    assert changed_lines(None) == []


def test_the_outcome_words_lead_the_reason_and_can_be_set_apart() -> None:
    verdict = judge_interval(_interval(-0.01, 0.04), POLICY)
    words, rest = verdict_parts(verdict.reason)
    assert words == "no detectable difference (the interval covers 0)"
    assert rest == "ndcg@5 +0.015 [95% CI -0.010, +0.040] over 120 questions; needs human approval"
    assert verdict_parts("first model: no production model to compare against") == (
        "first model",
        "no production model to compare against",
    )


def test_questions_people_wrote_or_asked_come_first_and_keyword_bags_never_show() -> None:
    # The demo's walk: generated keyword bags moved most, the reviewed and production questions never showed.
    questions = [
        _Q("gen-1", "print_stats self sort 1 file create_stats runctx", ("profile.md",)),
        _Q("rev-1", "how do I profile a function", ("profile.md",)),
        _Q("prod-1", "pretty print json", ("json.md",)),
        _Q("gen-2", "Reading and writing CSV files", ("csv.md",)),
    ]
    sources = ["inverse_cloze", "reviewed", "production_query", "heading"]
    ranked = [["profile.md"], ["x", "profile.md"], ["json.md"], ["csv.md"]]
    before = [["x"], ["x", "y", "profile.md"], ["y", "json.md"], ["y", "z", "csv.md"]]
    # The keyword bag and the heading moved most; the people's questions a little.
    cand, prod = [1.0, 0.6, 1.0, 1.0], [0.0, 0.5, 0.6, 0.0]
    changed = changed_questions(ranked, before, questions, cand, prod, sources=sources)
    assert [(c.id, c.source) for c in changed] == [
        ("prod-1", "production_query"),
        ("rev-1", "reviewed"),
        ("gen-2", "heading"),
    ]
    assert changed[0].to_dict()["source"] == "production_query"
    assert changed_lines([c.to_dict() for c in changed]) == [
        "better (production query): “pretty print json” — json.md: 2 → 1",
        "better (reviewed): “how do I profile a function” — profile.md: 3 → 2",
        "better (generated from a heading): “Reading and writing CSV files” — csv.md: 3 → 1",
    ]
    # Only keyword bags changed: nothing is shown rather than a question nobody asks.
    assert changed_questions(ranked[:1], before[:1], questions[:1], cand[:1], prod[:1], sources=sources[:1]) == []
    with pytest.raises(ValueError, match="sources"):
        changed_questions(ranked, before, questions, cand, prod, sources=sources[:2])
