"""The promotion gate's rule: whether a candidate is auto-approved, needs a human, or must not ship.

`judge` decides on the paired bootstrap interval (`policies/bootstrap.py`) of the primary metric's mean delta,
under a `GatePolicy` (`policies/gate_policy.py`). Kept free of I/O so the blocking asset check and the promotion
step (which re-verifies the decision) apply literally the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_ops.policies.bootstrap import Interval, paired_bootstrap, per_question, percent
from runtime_ops.policies.gate_policy import GatePolicy

__all__ = ["GateVerdict", "judge", "judge_interval"]

# Metrics are means over a few hundred questions; differences below this are float noise, and
# without it 0.62 - 0.60 (= 0.0199999...) would miss a 0.02 margin it visibly meets.
_EPSILON = 1e-9


@dataclass(frozen=True)
class GateVerdict:
    meets_policy: bool
    auto_approve: bool
    reason: str
    delta: float | None
    interval: Interval | None = None

    def interval_dict(self) -> dict[str, float | int] | None:
        return self.interval.to_dict() if self.interval is not None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able verdict for reports: plain bools, str, floats, and the interval (or None)."""
        return {
            "meets_policy": bool(self.meets_policy),
            "auto_approve": bool(self.auto_approve),
            "reason": self.reason,
            "delta": None if self.delta is None else float(self.delta),
            "interval": self.interval_dict(),
        }


MetricValues = float | np.ndarray | Sequence[float]


def judge(
    candidate: Mapping[str, MetricValues],
    production: Mapping[str, MetricValues] | None,
    policy: GatePolicy,
    *,
    candidate_is_production: bool = False,
    seed: int = 0,
) -> GateVerdict:
    """Decide whether a candidate may be promoted automatically, needs a human, or must not ship.

    With per-question values (arrays from `per_question_metrics`, on the same questions in the same
    order for both models) the decision rests on a paired bootstrap interval of the mean delta of
    `policy.primary_metric`:

    - auto-approve only when the interval's lower bound is >= `auto_approve_margin`;
    - fails the policy only when its upper bound is < -`max_regression`;
    - otherwise a human decides (the data cannot tell the models apart at the policy's precision).

    Comparing two models on means alone is a ValueError: it cannot tell noise from improvement.
    A first model (no production) and a candidate that is the production model are auto-approved.
    """
    metric = policy.primary_metric
    # Validate the candidate even for a first model: a report without the gate's metric means the
    # policy and the evaluation disagree, which should fail loudly rather than wave a model through.
    cand = _metric_values(candidate, metric, "candidate")
    if production is None:
        return GateVerdict(True, True, "first model: no production model to compare against", None)
    if candidate_is_production:
        same_delta = None
        if metric in production:
            same_delta = _mean(cand) - _mean(_metric_values(production, metric, "production"))
        return GateVerdict(True, True, "candidate is identical to the production model", same_delta)

    prod = _metric_values(production, metric, "production")
    if not isinstance(cand, np.ndarray) or not isinstance(prod, np.ndarray):
        # A difference of two means says nothing about noise: the gate only compares per-question values.
        raise ValueError(
            f"{metric}: comparing two models needs per-question values for both (got "
            f"{'values' if isinstance(cand, np.ndarray) else 'a single mean'} for the candidate and "
            f"{'values' if isinstance(prod, np.ndarray) else 'a single mean'} for production)"
        )
    interval = paired_bootstrap(cand, prod, resamples=policy.resamples, confidence=policy.confidence, seed=seed)
    return judge_interval(interval, policy)


def judge_interval(interval: Interval, policy: GatePolicy) -> GateVerdict:
    """The gate's rule applied to an already computed interval of the primary metric's mean delta."""
    metric = policy.primary_metric
    margin, limit = policy.auto_approve_margin, policy.max_regression
    described = interval.describe(metric)
    if interval.low >= margin - _EPSILON:
        reason = f"{described}: lower bound clears the margin {margin:.3f}"
        return GateVerdict(True, True, reason, interval.mean_delta, interval)
    if interval.high < -limit - _EPSILON:
        reason = f"{described}: upper bound is below the allowed regression -{limit:.3f}; regresses"
        return GateVerdict(False, False, reason, interval.mean_delta, interval)
    reason = (
        f"{described}: inconclusive at {percent(interval.confidence)} confidence (lower bound below the "
        f"auto-approve margin {margin:.3f}, upper bound not below the allowed regression -{limit:.3f}); "
        "needs human approval"
    )
    return GateVerdict(True, False, reason, interval.mean_delta, interval)


def _mean(values: float | np.ndarray) -> float:
    return float(values.mean()) if isinstance(values, np.ndarray) else float(values)


def _metric_values(metrics: Mapping[str, Any], metric: str, which: str) -> float | np.ndarray:
    """The primary metric as a float (a mean) or a non-empty 1-D float64 array (per question)."""
    if metric not in metrics:
        raise _missing(metrics, metric, which)
    value = metrics[metric]
    if isinstance(value, np.ndarray | list | tuple):
        array = per_question(value, f"{which} metric {metric!r}")
        if array.shape[0] == 0:
            raise ValueError(f"{which} metric {metric!r} has no per-question values")
        return array
    return _metric_value(metrics, metric, which)


def _missing(metrics: Mapping[str, Any], metric: str, which: str) -> ValueError:
    available = ", ".join(sorted(metrics)) or "none"
    return ValueError(f"{which} metrics have no {metric!r} (the gate's primary metric); available: {available}")


def _metric_value(metrics: Mapping[str, Any], metric: str, which: str) -> float:
    if metric not in metrics:
        raise _missing(metrics, metric, which)
    value = metrics[metric]
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"{which} metric {metric!r} is not a number: {value!r}")
    result = float(value)
    # NaN compares false both ways and would silently fall through to "needs a human".
    if not math.isfinite(result):
        raise ValueError(f"{which} metric {metric!r} is not finite: {result}")
    return result
