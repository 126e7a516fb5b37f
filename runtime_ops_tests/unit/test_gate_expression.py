"""The asset gate's `auto_approve` expression: what it approves and why, what it refuses at load, and that it fails
closed (a person decides) on a missing field or a non-number."""

from __future__ import annotations

import pytest

from runtime_ops.policies.gate_expression import GateExpressionError, compile_rule

RULE = "accuracy >= 0.92 and cost_usd < 50"


def test_a_clearly_good_materialization_passes_with_the_values_it_compared() -> None:
    rule = compile_rule(RULE)
    assert rule.names == ("accuracy", "cost_usd")
    assert rule.evaluate({"accuracy": 0.95, "cost_usd": 12.0, "labelled": 200}) == (
        True,
        "accuracy 0.95 >= 0.92 and cost_usd 12.0 < 50",
    )


def test_a_failing_part_is_named_and_the_rule_says_no() -> None:
    approve, reason = compile_rule(RULE).evaluate({"accuracy": 0.85, "cost_usd": 12.0})
    assert not approve
    assert reason == "accuracy 0.85 >= 0.92 does not hold"


@pytest.mark.parametrize(
    ("text", "evidence", "expected"),
    [
        ("0.9 <= accuracy < 1", {"accuracy": 0.95}, True),  # chained
        ("0.9 <= accuracy < 1", {"accuracy": 1.0}, False),
        ("not (cost_usd > 50) or labelled >= 1000", {"cost_usd": 80, "labelled": 1200}, True),
        ("correct / labelled >= 0.9", {"correct": 95, "labelled": 100}, True),
        ("cost_usd * 2 - 1 + -1 < 8", {"cost_usd": 5}, False),
        ("model == 'gpt-4o-mini' and drift != None", {"model": "gpt-4o-mini", "drift": 0.1}, True),
        ("reviewed == True", {"reviewed": True}, True),
    ],
)
def test_the_allowed_forms_evaluate_like_python(text: str, evidence: dict[str, object], expected: bool) -> None:
    assert compile_rule(text).evaluate(evidence)[0] is expected


@pytest.mark.parametrize(
    ("evidence", "named"),
    [
        ({"cost_usd": 12.0}, "no 'accuracy' metadata"),  # missing
        ({"accuracy": "0.99", "cost_usd": 1}, "accuracy is '0.99', not a number"),  # a string where a number is
        ({"accuracy": True, "cost_usd": 1}, "accuracy is True, not a number"),  # a bool is no number
        ({"accuracy": float("nan"), "cost_usd": 1}, "not a number"),
        ({"accuracy": None, "cost_usd": 1}, "accuracy is None, not a number"),
    ],
)
def test_missing_or_non_numeric_evidence_fails_closed(evidence: dict[str, object], named: str) -> None:
    approve, reason = compile_rule(RULE).evaluate(evidence)
    assert not approve
    assert named in reason and "a person decides" in reason


def test_a_division_by_zero_and_a_non_boolean_result_fail_closed() -> None:
    assert compile_rule("correct / labelled > 0.9").evaluate({"correct": 1, "labelled": 0})[0] is False
    approve, reason = compile_rule("accuracy + 1").evaluate({"accuracy": 0.5})
    assert not approve and "not true or false" in reason


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("__import__('os').system('id')", "the call"),
        ("len(accuracy) > 1", "the call"),
        ("accuracy.real > 0.9", "the attribute"),
        ("().__class__.__bases__", "the attribute"),
        ("__builtins__ == 1", "a name starting with '_'"),
        ("_private > 1", "a name starting with '_'"),
        ("scores[0] > 0.9", "the subscript"),
        ("(lambda: 1)() == 1", "the call"),
        ("lambda: 1", "the expression"),
        ("[x for x in y]", "the expression"),
        ("accuracy if True else 1", "the expression"),
        ("accuracy in (1, 2)", "the expression"),
        ("accuracy is None", "the expression"),
        ("2 ** 1000000", "the expression"),
        ("accuracy // 2 > 1", "the expression"),
        ("b'bytes' == accuracy", "the constant"),
        ("(x := 1)", "the expression"),
        ("f'{accuracy}' == '1'", "the expression"),
    ],
)
def test_hostile_or_unsupported_expressions_are_refused_at_load(text: str, named: str) -> None:
    with pytest.raises(GateExpressionError, match="allowed: evidence field names") as refused:
        compile_rule(text)
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "empty"),
        ("accuracy >=", "not an expression"),
        ("import os", "not an expression"),
        ("a > 1; b", "not an expression"),
        ("x > 1 " + "and x > 1 " * 200, "characters; at most 1000"),
        ("(" * 40 + "x" + ")" * 40, "parentheses"),
        ("not " * 100 + "x", "deeper than 32"),
        ("-" * 200 + "x > 1", "deeper than 32"),
    ],
)
def test_empty_malformed_huge_or_deep_input_is_refused_at_load(text: str, named: str) -> None:
    with pytest.raises(GateExpressionError, match=named):
        compile_rule(text)
