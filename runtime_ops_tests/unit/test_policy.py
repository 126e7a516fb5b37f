"""The promotion gate rule and the digests that pin an approval to one (model, report) pair."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from runtime_ops.policies.gate import GatePolicy, GateVerdict, candidate_digest, judge, report_digest

POLICY = GatePolicy()  # ndcg@5, margin 0.02, max regression 0.05


def test_first_model_is_auto_approved() -> None:
    verdict = judge({"ndcg@5": 0.1}, None, POLICY)
    assert verdict == GateVerdict(True, True, "first model: no production model to compare against", None)


def test_candidate_identical_to_production_is_auto_approved() -> None:
    verdict = judge({"ndcg@5": 0.4}, {"ndcg@5": 0.4}, POLICY, candidate_is_production=True)
    assert verdict.meets_policy and verdict.auto_approve
    assert verdict.reason == "candidate is identical to the production model"
    assert verdict.delta == 0.0


def test_clear_win_is_auto_approved() -> None:
    verdict = judge({"ndcg@5": 0.534}, {"ndcg@5": 0.5}, POLICY)
    assert verdict.meets_policy and verdict.auto_approve
    assert verdict.reason == "beats production by +0.034 ndcg@5 (margin 0.020)"
    assert verdict.delta == pytest.approx(0.034)


def test_win_exactly_at_margin_survives_float_noise() -> None:
    # 0.62 - 0.60 == 0.019999999999999907 in binary floating point.
    verdict = judge({"ndcg@5": 0.62}, {"ndcg@5": 0.60}, POLICY)
    assert verdict.auto_approve


@pytest.mark.parametrize("candidate", [0.51, 0.5, 0.46, 0.45])
def test_within_margin_needs_a_human(candidate: float) -> None:
    verdict = judge({"ndcg@5": candidate}, {"ndcg@5": 0.5}, POLICY)
    assert verdict.meets_policy
    assert not verdict.auto_approve
    assert verdict.reason.startswith("within margin: ")
    assert verdict.delta == pytest.approx(candidate - 0.5)


def test_regression_beyond_limit_fails_policy() -> None:
    verdict = judge({"ndcg@5": 0.42}, {"ndcg@5": 0.5}, POLICY)
    assert verdict == GateVerdict(
        False, False, "regresses by 0.080 ndcg@5 vs production (allowed regression 0.050)", verdict.delta
    )
    assert verdict.delta == pytest.approx(-0.08)


def test_custom_policy_metric_and_margins() -> None:
    policy = GatePolicy(primary_metric="mrr", auto_approve_margin=0.0, max_regression=0.0)
    assert judge({"mrr": 0.5}, {"mrr": 0.5}, policy).auto_approve
    assert not judge({"mrr": 0.49}, {"mrr": 0.5}, policy).meets_policy


def test_missing_primary_metric_names_metric_and_available_ones() -> None:
    with pytest.raises(ValueError, match=r"no 'ndcg@5'.*available: mrr, recall@5"):
        judge({"recall@5": 0.5, "mrr": 0.4}, {"ndcg@5": 0.5}, POLICY)
    with pytest.raises(ValueError, match=r"production metrics have no 'ndcg@5'"):
        judge({"ndcg@5": 0.5}, {"mrr": 0.4}, POLICY)
    # Even a first model must carry the metric the gate is configured for.
    with pytest.raises(ValueError, match="candidate metrics"):
        judge({"mrr": 0.4}, None, POLICY)


def test_non_finite_metric_is_rejected() -> None:
    with pytest.raises(ValueError, match="not finite"):
        judge({"ndcg@5": float("nan")}, {"ndcg@5": 0.5}, POLICY)


@pytest.mark.parametrize(
    "kwargs", [{"auto_approve_margin": -0.1}, {"max_regression": float("inf")}, {"primary_metric": ""}]
)
def test_invalid_policy_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GatePolicy(**kwargs)  # type: ignore[arg-type]


def test_candidate_digest_is_stable_ordered_and_prefix_free() -> None:
    expected = hashlib.sha256(b"model:aa\nreport:bb").hexdigest()
    assert candidate_digest("aa", "bb") == expected
    assert candidate_digest("bb", "aa") != expected
    # Without the newline ban, ("a\nreport:b", "c") and ("a", "b\nreport:c")-style pairs could collide.
    with pytest.raises(ValueError, match="single-line"):
        candidate_digest("aa\nreport:bb", "cc")
    with pytest.raises(ValueError, match="non-empty"):
        candidate_digest("", "bb")


def test_report_digest_ignores_key_order_and_float_noise() -> None:
    a = {"metrics": {"ndcg@5": 0.1 + 0.2, "mrr": 0.5}, "model": "abc", "ks": [1, 5, 10]}
    b = {"model": "abc", "ks": (1, 5, 10), "metrics": {"mrr": 0.5, "ndcg@5": 0.3}}
    assert report_digest(a) == report_digest(b)
    assert report_digest({"x": np.float32(0.5), "n": np.int64(3)}) == report_digest({"x": 0.5, "n": 3})
    assert report_digest({"x": -0.0}) == report_digest({"x": 0.0})


def test_report_digest_detects_real_changes() -> None:
    base = report_digest({"ndcg@5": 0.3})
    assert report_digest({"ndcg@5": 0.3001}) != base
    assert report_digest({"ndcg@5": 0.3, "extra": None}) != base
    assert len(base) == 64


@pytest.mark.parametrize(
    "report", [{"x": float("nan")}, {"x": {1: "int key"}}, {"x": object()}], ids=["nan", "int-key", "object"]
)
def test_report_digest_rejects_non_canonical_values(report: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        report_digest(report)
