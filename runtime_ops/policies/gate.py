"""The promotion gate's decision rule and the digests that bind a human decision to one candidate.

Kept free of I/O so the blocking asset check and the promotion step (which re-verifies the
decision) apply literally the same rule.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = [
    "ChangedQuestion",
    "GatePolicy",
    "GateVerdict",
    "Interval",
    "candidate_digest",
    "changed_questions",
    "judge",
    "judge_interval",
    "paired_bootstrap",
    "report_digest",
]

# Metrics are means over a few hundred questions; differences below this are float noise, and
# without it 0.62 - 0.60 (= 0.0199999...) would miss a 0.02 margin it visibly meets.
_EPSILON = 1e-9
_SIGNIFICANT_DIGITS = 12


# Upper bound on the resample-index block of `paired_bootstrap` (int64 elements): 2M is 16 MB.
_BOOTSTRAP_ELEMENTS = 2_000_000
_MIN_POLICY_RESAMPLES = 100


@dataclass(frozen=True)
class GatePolicy:
    """Higher is better for `primary_metric`; margins are absolute differences on that metric.

    The gate compares the two models on the same questions with a paired bootstrap
    (`paired_bootstrap`): `confidence` is the interval's coverage and `resamples` its number of
    bootstrap resamples.
    """

    primary_metric: str = "ndcg@5"
    auto_approve_margin: float = 0.02
    max_regression: float = 0.05
    confidence: float = 0.95
    resamples: int = 2000

    def __post_init__(self) -> None:
        if not self.primary_metric:
            raise ValueError("GatePolicy.primary_metric must be a metric name")
        for name in ("auto_approve_margin", "max_regression"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"GatePolicy.{name} must be a finite number >= 0, got {value!r}")
        _check_confidence(self.confidence, "GatePolicy.confidence")
        resamples = self.resamples
        if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < _MIN_POLICY_RESAMPLES:
            raise ValueError(f"GatePolicy.resamples must be an integer >= {_MIN_POLICY_RESAMPLES}, got {resamples!r}")


@dataclass(frozen=True)
class Interval:
    """A paired-bootstrap interval for mean(candidate) - mean(production) over `n` questions."""

    mean_delta: float
    low: float
    high: float
    n: int
    resamples: int
    confidence: float

    def to_dict(self) -> dict[str, float | int]:
        """JSON-able (plain floats and ints) for reports and metadata."""
        return {
            "mean_delta": float(self.mean_delta),
            "low": float(self.low),
            "high": float(self.high),
            "n": int(self.n),
            "resamples": int(self.resamples),
            "confidence": float(self.confidence),
        }

    def describe(self, metric: str) -> str:
        """E.g. "ndcg@5 +0.031 [95% CI +0.012, +0.049] over 120 questions"."""
        return (
            f"{metric} {_signed(self.mean_delta)} [{_percent(self.confidence)} CI {_signed(self.low)}, "
            f"{_signed(self.high)}] over {self.n} question{'s' if self.n != 1 else ''}"
        )


def paired_bootstrap(
    candidate: np.ndarray,
    production: np.ndarray,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval for the mean per-question difference candidate - production.

    `candidate[i]` and `production[i]` must score the same question i (paired design): each
    resample draws question indices with replacement and takes the mean of the per-question
    deltas, so the variation between questions that both models share cancels out. The interval is
    the (1 - confidence) / 2 and (1 + confidence) / 2 percentiles of the resampled means (the plain
    percentile method: no bias correction, adequate for means of bounded per-question scores over
    tens to hundreds of questions). Resampling is vectorised in blocks of at most
    `_BOOTSTRAP_ELEMENTS` indices; the block size depends only on the number of questions, so the
    result is a deterministic function of (values, resamples, seed).
    """
    cand = _per_question(candidate, "candidate")
    prod = _per_question(production, "production")
    if cand.shape != prod.shape:
        raise ValueError(
            f"paired comparison needs the same questions: {cand.shape[0]} candidate vs "
            f"{prod.shape[0]} production values"
        )
    if cand.shape[0] == 0:
        raise ValueError("no questions to compare: a bootstrap over zero questions is undefined")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    _check_confidence(confidence, "confidence")

    deltas = cand - prod
    n = deltas.shape[0]
    mean_delta = float(deltas.mean())
    if np.all(deltas == deltas[0]):
        # Every resample has the same mean; skip the work (and any float noise in it).
        low = high = mean_delta
    else:
        rng = np.random.default_rng(seed)
        block = max(1, _BOOTSTRAP_ELEMENTS // n)
        means = np.empty(resamples)
        for start in range(0, resamples, block):
            stop = min(resamples, start + block)
            indices = rng.integers(0, n, size=(stop - start, n))
            means[start:stop] = deltas[indices].mean(axis=1)
        tail = (1.0 - confidence) / 2
        low, high = (float(q) for q in np.quantile(means, [tail, 1.0 - tail]))
    return Interval(mean_delta, low, high, n, resamples, float(confidence))


def _per_question(values: Any, which: str) -> np.ndarray:
    if isinstance(values, bool | int | float | np.number):
        raise ValueError(f"{which}: a paired comparison needs per-question values, got a single number {values!r}")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{which}: per-question values must be numbers ({exc})") from exc
    if array.ndim != 1:
        raise ValueError(f"{which}: per-question values must be 1-D, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{which}: per-question values are not all finite")
    return array


def _check_confidence(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")


def _signed(value: float) -> str:
    # Round before choosing the sign so float noise never prints as "-0.000".
    return f"{round(value, 3) + 0.0:+.3f}"


def _percent(confidence: float) -> str:
    return f"{confidence * 100:.4g}%"


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

    Scalar metrics (means) are still accepted for the primary metric on both sides and are judged on the point
    estimate alone, as before; that path has no uncertainty (`interval` is None) and is kept only
    until every caller passes per-question values. Mixing a scalar and an array is a ValueError.
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
    if not isinstance(cand, np.ndarray) and not isinstance(prod, np.ndarray):
        return _judge_means(cand - prod, metric, policy)
    if not isinstance(cand, np.ndarray) or not isinstance(prod, np.ndarray):
        raise ValueError(
            f"{metric}: one side has per-question values and the other a single mean; "
            "a paired comparison needs per-question values for both models"
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
        f"{described}: inconclusive at {_percent(interval.confidence)} confidence (lower bound below the "
        f"auto-approve margin {margin:.3f}, upper bound not below the allowed regression -{limit:.3f}); "
        "needs human approval"
    )
    return GateVerdict(True, False, reason, interval.mean_delta, interval)


def _judge_means(delta: float, metric: str, policy: GatePolicy) -> GateVerdict:
    margin, limit = policy.auto_approve_margin, policy.max_regression
    if delta >= margin - _EPSILON:
        return GateVerdict(True, True, f"beats production by {delta:+.3f} {metric} (margin {margin:.3f})", delta)
    if delta >= -limit - _EPSILON:
        reason = (
            f"within margin: {delta:+.3f} {metric} vs production is below the auto-approve margin "
            f"{margin:.3f} and within the allowed regression {limit:.3f}; needs human approval"
        )
        return GateVerdict(True, False, reason, delta)
    reason = f"regresses by {-delta:.3f} {metric} vs production (allowed regression {limit:.3f})"
    return GateVerdict(False, False, reason, delta)


def _mean(values: float | np.ndarray) -> float:
    return float(values.mean()) if isinstance(values, np.ndarray) else float(values)


def _metric_values(metrics: Mapping[str, Any], metric: str, which: str) -> float | np.ndarray:
    """The primary metric as a float (a mean) or a non-empty 1-D float64 array (per question)."""
    if metric not in metrics:
        raise _missing(metrics, metric, which)
    value = metrics[metric]
    if isinstance(value, np.ndarray | list | tuple):
        array = _per_question(value, f"{which} metric {metric!r}")
        if array.shape[0] == 0:
            raise ValueError(f"{which} metric {metric!r} has no per-question values")
        return array
    return _metric_value(metrics, metric, which)


def _missing(metrics: Mapping[str, Any], metric: str, which: str) -> ValueError:
    available = ", ".join(sorted(metrics)) or "none"
    return ValueError(f"{which} metrics have no {metric!r} (the gate's primary metric); available: {available}")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


@dataclass(frozen=True)
class ChangedQuestion:
    """One question whose top results differ between the candidate and production rankings."""

    id: str
    change: float  # 1 - Jaccard similarity of the two top-k document sets, in (0, 1]
    candidate_top: tuple[str, ...]
    production_top: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "change": float(self.change),
            "candidate_top": list(self.candidate_top),
            "production_top": list(self.production_top),
        }


def changed_questions(
    cand_ranked: Sequence[Sequence[str]],
    prod_ranked: Sequence[Sequence[str]],
    questions: Sequence[_HasId],
    limit: int = 5,
    *,
    top_k: int = 5,
) -> list[ChangedQuestion]:
    """The questions whose top results changed most between the two models, most changed first.

    Change is 1 - Jaccard(top-k of candidate, top-k of production) as document sets, so a mere
    reordering inside the top k does not count; ties are ordered by question id. Questions whose
    top-k sets are equal are left out, so fewer than `limit` may be returned.
    """
    if not len(cand_ranked) == len(prod_ranked) == len(questions):
        raise ValueError(
            f"{len(cand_ranked)} candidate rankings, {len(prod_ranked)} production rankings "
            f"for {len(questions)} questions"
        )
    for name, value in (("limit", limit), ("top_k", top_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    changed: list[ChangedQuestion] = []
    for cand, prod, question in zip(cand_ranked, prod_ranked, questions, strict=True):
        cand_top = tuple(dict.fromkeys(cand))[:top_k]
        prod_top = tuple(dict.fromkeys(prod))[:top_k]
        union = set(cand_top) | set(prod_top)
        if not union:
            continue
        change = 1.0 - len(set(cand_top) & set(prod_top)) / len(union)
        if change > 0:
            changed.append(ChangedQuestion(question.id, change, cand_top, prod_top))
    changed.sort(key=lambda c: (-c.change, c.id))
    return changed[:limit]


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


def candidate_digest(model_digest: str, report_digest: str) -> str:
    """sha256 identifying (model, evaluation report): an approval is valid for exactly this pair."""
    for name, value in (("model_digest", model_digest), ("report_digest", report_digest)):
        # Forbidding newlines keeps the "model:<a>\nreport:<b>" encoding unambiguous (prefix-free).
        if not isinstance(value, str) or not value or "\n" in value:
            raise ValueError(f"{name} must be a non-empty single-line string, got {value!r}")
    payload = f"model:{model_digest}\nreport:{report_digest}".encode()
    return hashlib.sha256(payload).hexdigest()


def report_digest(report: Mapping[str, object]) -> str:
    """sha256 of canonical JSON: sorted keys, floats rounded to 12 significant digits."""
    canonical = json.dumps(
        _canonical(report, "report"),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _canonical(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.generic):
        value = value.item()  # numpy scalars become their Python equivalents
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is not finite ({value}); a report must hold finite numbers")
        # Rounding hides last-bit noise between runs; + 0.0 folds -0.0 into 0.0.
        return float(f"{value:.{_SIGNIFICANT_DIGITS}g}") + 0.0
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            # Non-string keys would be coerced by json (1 and "1" colliding), so refuse them.
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}")
            out[key] = _canonical(item, f"{where}.{key}")
        return out
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [_canonical(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{where} has a value of unsupported type {type(value).__name__}")
