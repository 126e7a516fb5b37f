"""The promotion gate's decision rule and the digests that bind a human decision to one candidate.

Kept free of I/O so the blocking asset check and the promotion step (which re-verifies the
decision) apply literally the same rule.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GatePolicy", "GateVerdict", "candidate_digest", "judge", "report_digest"]

# Metrics are means over a few hundred questions; differences below this are float noise, and
# without it 0.62 - 0.60 (= 0.0199999...) would miss a 0.02 margin it visibly meets.
_EPSILON = 1e-9
_SIGNIFICANT_DIGITS = 12


@dataclass(frozen=True)
class GatePolicy:
    """Higher is better for `primary_metric`; margins are absolute differences on that metric."""

    primary_metric: str = "ndcg@5"
    auto_approve_margin: float = 0.02
    max_regression: float = 0.05

    def __post_init__(self) -> None:
        if not self.primary_metric:
            raise ValueError("GatePolicy.primary_metric must be a metric name")
        for name in ("auto_approve_margin", "max_regression"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"GatePolicy.{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class GateVerdict:
    meets_policy: bool
    auto_approve: bool
    reason: str
    delta: float | None


def judge(
    candidate: Mapping[str, float],
    production: Mapping[str, float] | None,
    policy: GatePolicy,
    *,
    candidate_is_production: bool = False,
) -> GateVerdict:
    """Decide whether a candidate may be promoted automatically, needs a human, or must not ship."""
    metric = policy.primary_metric
    # Validate the candidate even for a first model: a report without the gate's metric means the
    # policy and the evaluation disagree, which should fail loudly rather than wave a model through.
    cand = _metric_value(candidate, metric, "candidate")
    if production is None:
        return GateVerdict(True, True, "first model: no production model to compare against", None)
    if candidate_is_production:
        same_delta = cand - float(production[metric]) if metric in production else None
        return GateVerdict(True, True, "candidate is identical to the production model", same_delta)

    delta = cand - _metric_value(production, metric, "production")
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


def _metric_value(metrics: Mapping[str, float], metric: str, which: str) -> float:
    if metric not in metrics:
        available = ", ".join(sorted(metrics)) or "none"
        raise ValueError(f"{which} metrics have no {metric!r} (the gate's primary metric); available: {available}")
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
