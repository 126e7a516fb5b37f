"""The promotion gate rule and the digests that pin an approval to one (model, report) pair."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from runtime_ops.policies import bootstrap as gate
from runtime_ops.policies.bootstrap import paired_bootstrap
from runtime_ops.policies.digests import candidate_digest, report_digest
from runtime_ops.policies.gate_policy import GatePolicy
from runtime_ops.policies.gate_rule import GateVerdict, judge, judge_interval
from runtime_ops.policies.gate_text import Outcome

POLICY = GatePolicy()  # ndcg@5, margin 0.02, max regression 0.05


def test_first_model_is_auto_approved() -> None:
    verdict = judge({"ndcg@5": 0.1}, None, POLICY)
    assert verdict == GateVerdict(
        True, True, "first model: no production model to compare against", None, Outcome.FIRST_MODEL
    )


def test_candidate_identical_to_production_is_auto_approved() -> None:
    verdict = judge({"ndcg@5": 0.4}, {"ndcg@5": 0.4}, POLICY, candidate_is_production=True)
    assert verdict.meets_policy and verdict.auto_approve
    assert verdict.reason == "candidate is identical to the production model"
    assert verdict.delta == 0.0


def test_two_means_are_not_a_comparison() -> None:
    with pytest.raises(ValueError, match="needs per-question values for both"):
        judge({"ndcg@5": 0.534}, {"ndcg@5": 0.5}, POLICY)
    with pytest.raises(ValueError, match="a single mean for production"):
        judge({"ndcg@5": [0.5, 0.6]}, {"ndcg@5": 0.5}, POLICY)


def test_custom_policy_metric_and_margins() -> None:
    policy = GatePolicy(primary_metric="mrr", auto_approve_margin=0.0, max_regression=0.0)
    same = np.full(50, 0.5)
    assert judge({"mrr": same}, {"mrr": same}, policy).auto_approve, "a zero-width interval at 0 clears margin 0"
    assert not judge({"mrr": same - 0.01}, {"mrr": same}, policy).meets_policy


def test_missing_primary_metric_names_metric_and_available_ones() -> None:
    with pytest.raises(ValueError, match=r"no 'ndcg@5'.*available: mrr, recall@5"):
        judge({"recall@5": 0.5, "mrr": 0.4}, {"ndcg@5": 0.5}, POLICY)
    with pytest.raises(ValueError, match=r"production metrics have no 'ndcg@5'"):
        judge({"ndcg@5": [0.5]}, {"mrr": [0.4]}, POLICY)
    # Even a first model must carry the metric the gate is configured for.
    with pytest.raises(ValueError, match="candidate metrics"):
        judge({"mrr": 0.4}, None, POLICY)


def test_non_finite_metric_is_rejected() -> None:
    with pytest.raises(ValueError, match="not finite"):
        judge({"ndcg@5": float("nan")}, {"ndcg@5": [0.5]}, POLICY)


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


# -- paired bootstrap and the interval gate ------------------------------------------------------


def _paired_scores(seed: int, n: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-question scores of two models on the same questions: a shared per-question difficulty
    plus each model's own noise, clipped to [0, 1] like nDCG; the candidate is shifted by `shift`."""
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0.0, 1.0, size=n)
    production = np.clip(difficulty + rng.normal(0.0, 0.15, size=n), 0.0, 1.0)
    candidate = np.clip(difficulty + shift + rng.normal(0.0, 0.15, size=n), 0.0, 1.0)
    return candidate, production


def test_paired_bootstrap_is_deterministic_and_centred() -> None:
    cand, prod = _paired_scores(1, 200, shift=0.03)
    first = paired_bootstrap(cand, prod, seed=5)
    assert first == paired_bootstrap(cand, prod, seed=5)
    assert first != paired_bootstrap(cand, prod, seed=6)
    assert first.mean_delta == pytest.approx(float((cand - prod).mean()))
    assert first.low < first.mean_delta < first.high
    assert (first.n, first.resamples, first.confidence) == (200, 2000, 0.95)
    # The percentile interval of a mean is close to the normal one, mean +- 1.96 standard errors.
    se = float((cand - prod).std(ddof=1)) / np.sqrt(200)
    assert first.high - first.low == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert first.to_dict() == {
        "mean_delta": first.mean_delta,
        "low": first.low,
        "high": first.high,
        "n": 200,
        "resamples": 2000,
        "confidence": 0.95,
    }
    assert all(type(v) in (int, float) for v in first.to_dict().values())


def test_paired_bootstrap_block_size_does_not_change_coverage(monkeypatch: pytest.MonkeyPatch) -> None:
    cand, prod = _paired_scores(2, 100)
    monkeypatch.setattr(gate, "_BOOTSTRAP_ELEMENTS", 700)  # 7 resamples per block, a ragged last block
    small_blocks = paired_bootstrap(cand, prod, resamples=1001)
    monkeypatch.undo()
    whole = paired_bootstrap(cand, prod, resamples=1001)
    assert small_blocks.mean_delta == whole.mean_delta
    assert small_blocks.low == pytest.approx(whole.low, abs=0.01)
    assert small_blocks.high == pytest.approx(whole.high, abs=0.01)


def test_interval_shrinks_with_more_questions() -> None:
    widths = []
    for n in (50, 200, 800):
        interval = paired_bootstrap(*_paired_scores(3, n))
        widths.append(interval.high - interval.low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(4.0, rel=0.35)  # ~ 1 / sqrt(n)


def test_paired_bootstrap_identical_and_constant_deltas() -> None:
    values = np.array([0.1, 0.5, 0.9])
    assert paired_bootstrap(values, values) == gate.Interval(0.0, 0.0, 0.0, 3, 2000, 0.95)
    shifted = paired_bootstrap(values + 0.25, values)
    # Float rounding makes these deltas differ in the last bit, so the bounds are equal only approximately.
    assert (shifted.mean_delta, shifted.low, shifted.high) == pytest.approx((0.25, 0.25, 0.25))


@pytest.mark.parametrize(
    ("cand", "prod", "kwargs", "message"),
    [
        ([0.1, 0.2], [0.1], {}, "same questions"),
        ([], [], {}, "zero questions"),
        ([0.1, float("nan")], [0.1, 0.2], {}, "not all finite"),
        ([[0.1]], [[0.1]], {}, "1-D"),
        ([0.1], [0.1], {"resamples": 0}, "resamples"),
        ([0.1], [0.1], {"confidence": 1.0}, "between 0 and 1"),
    ],
)
def test_paired_bootstrap_rejects_bad_input(cand: list, prod: list, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(np.array(cand), np.array(prod), **kwargs)


def test_noise_never_auto_approves_nor_fails_while_a_mean_only_rule_would() -> None:
    # Both models draw per-question scores from the same distribution: any difference is noise.
    mean_rule_auto_approvals = 0
    for seed in range(100):
        cand, prod = _paired_scores(seed, 200)
        verdict = judge({"ndcg@5": cand}, {"ndcg@5": prod}, POLICY)
        assert verdict.meets_policy, verdict.reason
        assert not verdict.auto_approve, verdict.reason
        assert verdict.interval is not None and verdict.interval.low < 0.02
        mean_rule_auto_approvals += float(cand.mean() - prod.mean()) >= POLICY.auto_approve_margin
    # The point-estimate rule waves noise through now and then; the interval rule does not.
    assert mean_rule_auto_approvals > 0


def test_clear_improvement_auto_approves_with_the_interval_in_the_reason() -> None:
    cand, prod = _paired_scores(11, 300, shift=0.08)
    verdict = judge({"ndcg@5": cand}, {"ndcg@5": list(prod)}, POLICY)
    interval = verdict.interval
    assert interval is not None
    assert verdict.meets_policy and verdict.auto_approve
    assert verdict.delta == interval.mean_delta
    assert verdict.outcome is Outcome.CLEARS_MARGIN
    assert verdict.reason == (
        "better by at least the auto-approve margin +0.020: "
        f"ndcg@5 {interval.mean_delta:+.3f} [95% CI {interval.low:+.3f}, {interval.high:+.3f}] "
        "over 300 questions; auto-approved"
    )
    as_dict = verdict.to_dict()
    assert as_dict["interval"] == interval.to_dict() == verdict.interval_dict()
    assert report_digest(as_dict)  # JSON-able and canonical


def test_clear_regression_fails_policy() -> None:
    cand, prod = _paired_scores(12, 300, shift=-0.15)
    verdict = judge({"ndcg@5": cand}, {"ndcg@5": prod}, POLICY)
    assert not verdict.meets_policy and not verdict.auto_approve
    assert verdict.outcome is Outcome.WORSE_BEYOND_LIMIT
    assert verdict.reason.startswith("worse beyond the allowed regression -0.050: ndcg@5 ")
    assert verdict.reason.endswith("; fails the policy")


def test_small_win_on_few_questions_needs_a_human() -> None:
    cand, prod = _paired_scores(13, 40, shift=0.03)
    verdict = judge({"ndcg@5": cand}, {"ndcg@5": prod}, POLICY)
    assert verdict.meets_policy and not verdict.auto_approve
    assert verdict.outcome in (Outcome.BETTER_BELOW_MARGIN, Outcome.NO_DIFFERENCE)
    assert "over 40 questions; needs human approval" in verdict.reason


def test_judge_interval_boundaries_and_reason_format() -> None:
    def at(low: float, high: float, mean: float = 0.031) -> GateVerdict:
        return judge_interval(gate.Interval(mean, low, high, 120, 2000, 0.95), POLICY)

    assert at(0.02, 0.05).auto_approve  # lower bound exactly at the margin
    assert at(0.62 - 0.60, 0.05).auto_approve  # ... despite float noise
    assert not at(0.019, 0.05).auto_approve
    assert not at(-0.09, -0.051).meets_policy
    assert at(-0.09, -0.05).meets_policy  # upper bound exactly at the allowed regression
    assert ": ndcg@5 +0.031 [95% CI +0.012, +0.049] over 120 questions; " in at(0.012, 0.049).reason
    # Rounding happens before the sign is chosen, so -0.0001 never prints as "-0.000".
    one = judge_interval(gate.Interval(-0.0, -0.0001, 0.0001, 1, 2000, 0.9), POLICY)
    assert ": ndcg@5 +0.000 [90% CI +0.000, +0.000] over 1 question; " in one.reason


def test_judge_per_question_edge_cases() -> None:
    values = np.array([0.2, 0.4])
    # First model and identical model keep their rules with per-question values.
    assert judge({"ndcg@5": values}, None, POLICY).auto_approve
    same = judge({"ndcg@5": values}, {"ndcg@5": values}, POLICY, candidate_is_production=True)
    assert same.auto_approve and same.delta == 0.0 and same.interval is None
    # Identical per-question values: the interval is the point 0, which a margin of 0 clears.
    zero_margin = GatePolicy(auto_approve_margin=0.0)
    assert judge({"ndcg@5": values}, {"ndcg@5": values}, zero_margin).auto_approve
    with pytest.raises(ValueError, match="per-question values for both"):
        judge({"ndcg@5": values}, {"ndcg@5": 0.3}, POLICY)
    with pytest.raises(ValueError, match="not all finite"):
        judge({"ndcg@5": np.array([0.2, np.inf])}, {"ndcg@5": values}, POLICY)
    with pytest.raises(ValueError, match="no per-question values"):
        judge({"ndcg@5": np.array([])}, None, POLICY)
    with pytest.raises(ValueError, match="same questions"):
        judge({"ndcg@5": values}, {"ndcg@5": values[:1]}, POLICY)
    with pytest.raises(ValueError, match=r"production metrics have no 'ndcg@5'"):
        judge({"ndcg@5": values}, {"mrr": values}, POLICY)
    # The seed makes the bootstrap, hence the verdict, reproducible.
    cand, prod = _paired_scores(4, 80, shift=0.02)
    assert judge({"ndcg@5": cand}, {"ndcg@5": prod}, POLICY, seed=3) == judge(
        {"ndcg@5": cand}, {"ndcg@5": prod}, POLICY, seed=3
    )


@pytest.mark.parametrize("kwargs", [{"confidence": 0.0}, {"confidence": 1.5}, {"resamples": 10}, {"resamples": 2.5}])
def test_invalid_bootstrap_policy_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GatePolicy(**kwargs)  # type: ignore[arg-type]
