"""The promotion gate's rule: whether a candidate is auto-approved, needs a human, or must not ship.

`judge` decides on the paired bootstrap interval (`policies/bootstrap.py`) of the primary metric's mean delta,
under a `GatePolicy` (`policies/gate_policy.py`). Kept free of I/O so the blocking asset check and the promotion
step (which re-verifies the decision) apply literally the same rule.

`judge_online` is the online half: what a pending request's live-traffic evidence (`online/evidence.py`, reduced
here to its verdict and whether its mode may decide) does under `GatePolicy.online`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from runtime_ops.policies.bootstrap import Interval, paired_bootstrap, per_question
from runtime_ops.policies.gate_policy import GatePolicy, OnlinePolicy
from runtime_ops.policies.gate_text import Outcome, outcome_words

__all__ = ["GateVerdict", "OnlineAction", "OnlineRuling", "judge", "judge_interval", "judge_online", "outcome_of"]

# Metrics are means over a few hundred questions; differences below this are float noise, and
# without it 0.62 - 0.60 (= 0.0199999...) would miss a 0.02 margin it visibly meets.
_EPSILON = 1e-9


@dataclass(frozen=True)
class GateVerdict:
    meets_policy: bool
    auto_approve: bool
    reason: str
    delta: float | None
    outcome: Outcome  # which case of the rule decided: its words start the reason
    interval: Interval | None = None

    def interval_dict(self) -> dict[str, float | int] | None:
        return self.interval.to_dict() if self.interval is not None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able verdict for reports: plain bools, str, floats, and the interval (or None)."""
        return {
            "meets_policy": bool(self.meets_policy),
            "auto_approve": bool(self.auto_approve),
            "reason": self.reason,
            "outcome": str(self.outcome),
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
    - otherwise a human decides: better but below the margin, no detectable difference, or worse but not
      beyond the allowed regression (`outcome_of` names which; `policies/gate_text.py` says it in words).

    Comparing two models on means alone is a ValueError: it cannot tell noise from improvement.
    A first model (no production) and a candidate that is the production model are auto-approved.
    """
    metric = policy.primary_metric
    # Validate the candidate even for a first model: a report without the gate's metric means the
    # policy and the evaluation disagree, which should fail loudly rather than wave a model through.
    cand = _metric_values(candidate, metric, "candidate")
    if production is None:
        return GateVerdict(True, True, outcome_words(Outcome.FIRST_MODEL), None, Outcome.FIRST_MODEL)
    if candidate_is_production:
        same_delta = None
        if metric in production:
            same_delta = _mean(cand) - _mean(_metric_values(production, metric, "production"))
        return GateVerdict(True, True, outcome_words(Outcome.IDENTICAL), same_delta, Outcome.IDENTICAL)

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
    """The gate's rule applied to an already computed interval of the primary metric's mean delta.

    The reason reads "<outcome in words>: <the interval>; <what follows>", e.g. "better, but below the
    auto-approve margin +1.000: ndcg@5 +0.124 [95% CI +0.085, +0.164] over 120 questions; needs human approval".
    """
    outcome = outcome_of(interval.low, interval.high, policy)
    words = outcome_words(outcome, margin=policy.auto_approve_margin, max_regression=policy.max_regression)
    auto_approve = outcome is Outcome.CLEARS_MARGIN
    meets_policy = outcome is not Outcome.WORSE_BEYOND_LIMIT
    follows = "auto-approved" if auto_approve else "needs human approval" if meets_policy else "fails the policy"
    reason = f"{words}: {interval.describe(policy.primary_metric)}; {follows}"
    return GateVerdict(meets_policy, auto_approve, reason, interval.mean_delta, outcome, interval)


def outcome_of(low: float, high: float, policy: GatePolicy) -> Outcome:
    """Which of the five cases an interval [low, high] of candidate - production is under `policy`.

    Only the first case auto-approves and only the last fails the policy; the three between need a person. With
    `auto_approve_margin` 0 an interval starting at 0 clears it (not worse, as the policy's author asked).
    """
    if low >= policy.auto_approve_margin - _EPSILON:
        return Outcome.CLEARS_MARGIN
    if high < -policy.max_regression - _EPSILON:
        return Outcome.WORSE_BEYOND_LIMIT
    if low > _EPSILON:
        return Outcome.BETTER_BELOW_MARGIN
    if high < -_EPSILON:
        return Outcome.WORSE_WITHIN_LIMIT
    return Outcome.NO_DIFFERENCE


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


OnlineAction = Literal["approve", "reject", "wait", "none"]


@dataclass(frozen=True)
class OnlineRuling:
    """What the online evidence does to a pending request: `approve` or `reject` it (by policy), `wait` (the
    policy needs more before it may auto-approve; a person may still decide), or `none` (it changes nothing)."""

    action: OnlineAction
    reason: str


def judge_online(
    *,
    policy: OnlinePolicy,
    offline_auto_approve: bool,
    first_model: bool,
    verdict: str | None,
    decides: bool = True,
    error: str | None = None,
    caveat: str | None = None,
) -> OnlineRuling:
    """The online half of the gate for one pending request.

    `verdict` is the rollout's evidence verdict ("better", "worse", "no difference yet", "not enough queries"; the
    count is already in it: "worse" and "better" need `min_queries`), None when no rollout ran beside the request;
    `decides` False for evidence that only informs (shadow); `error` when the evidence could not be computed;
    `caveat` why the evidence is "not decisive" (one key or session dominates it, or a sample-ratio mismatch).

    - a first model has nothing to compare with: the online half is skipped;
    - an error never approves (fail closed) and rejects nothing: the request waits;
    - a confident loss rejects, whether or not the policy requires online evidence;
    - with `required`, auto-approval needs the offline verdict's auto-approve AND an online "better".
    """
    if first_model:
        return OnlineRuling("none", "a first model has no production to compare with: no online evidence needed")
    if error is not None:
        return OnlineRuling("wait", f"online evidence could not be computed ({error}): nothing is approved on it")
    if verdict == "worse" and decides:
        return OnlineRuling("reject", "the candidate loses to production on live traffic with confidence")
    if verdict == "not decisive":
        return OnlineRuling("wait", f"online evidence is not decisive ({caveat or 'no reason given'}): nothing is "
                            "decided on it")  # fmt: skip
    if not policy.required:
        return OnlineRuling("none", "online evidence is shown, not required")
    if not offline_auto_approve:
        return OnlineRuling("wait", "the offline verdict does not auto-approve: a person decides")
    if verdict is None:
        return OnlineRuling("wait", "online evidence is required but no rollout runs beside this request")
    if not decides:
        return OnlineRuling("wait", "online evidence is required but a shadow rollout only informs")
    if verdict == "better":
        return OnlineRuling("approve", "better offline (auto-approve margin) and better on live traffic")
    return OnlineRuling("wait", f"online evidence is required and says {verdict!r} so far")
