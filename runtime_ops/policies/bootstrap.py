"""The paired bootstrap interval of mean(candidate) - mean(production) over the same questions (numpy).

The gate's rule (`policies/gate_rule.py`) compares two models on it; kept apart so the policy type
(`policies/gate_policy.py`) is importable without numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_ops.policies.gate_policy import check_confidence

__all__ = ["Interval", "paired_bootstrap", "per_question", "percent"]

# Upper bound on the resample-index block of `paired_bootstrap` (int64 elements): 2M is 16 MB.
_BOOTSTRAP_ELEMENTS = 2_000_000


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
            f"{metric} {_signed(self.mean_delta)} [{percent(self.confidence)} CI {_signed(self.low)}, "
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
    cand = per_question(candidate, "candidate")
    prod = per_question(production, "production")
    if cand.shape != prod.shape:
        raise ValueError(
            f"paired comparison needs the same questions: {cand.shape[0]} candidate vs "
            f"{prod.shape[0]} production values"
        )
    if cand.shape[0] == 0:
        raise ValueError("no questions to compare: a bootstrap over zero questions is undefined")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    check_confidence(confidence, "confidence")

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


def per_question(values: Any, which: str) -> np.ndarray:
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


def _signed(value: float) -> str:
    # Round before choosing the sign so float noise never prints as "-0.000".
    return f"{round(value, 3) + 0.0:+.3f}"


def percent(confidence: float) -> str:
    return f"{confidence * 100:.4g}%"
