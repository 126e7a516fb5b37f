"""The promotion gate's policy: the one type the pipeline's YAML (`gate:`), the settings and the gate's rule use.

Plain data with its own validation and no numpy, so the pipeline spec holds it and the code location imports it
cheaply; the rule that applies it is `policies/gate_rule.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GatePolicy", "OnlinePolicy", "check_confidence"]

_MIN_POLICY_RESAMPLES = 100


@dataclass(frozen=True)
class OnlinePolicy:
    """Whether the gate also needs evidence from live traffic (a rollout's interleaving, canary or shadow
    comparison) before it auto-approves, how many of the rollout's queries that evidence must count, and how much of
    it one API key or one session may contribute (more, and theirs is left out: `online/evidence.py`). Declared
    per pipeline (`gate.online`); not required by default, and a first model (nothing to compare with) skips it."""

    required: bool = False
    min_queries: int = 500
    max_key_share: float = 0.5
    max_session_share: float = 0.1

    def __post_init__(self) -> None:
        value = self.min_queries
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"OnlinePolicy.min_queries must be an integer >= 1, got {value!r}")
        for name in ("max_key_share", "max_session_share"):
            share = getattr(self, name)
            if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
                raise ValueError(f"OnlinePolicy.{name} must be a share in (0, 1], got {share!r}")


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
    online: OnlinePolicy = field(default_factory=OnlinePolicy)

    def __post_init__(self) -> None:
        if not self.primary_metric:
            raise ValueError("GatePolicy.primary_metric must be a metric name")
        for name in ("auto_approve_margin", "max_regression"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"GatePolicy.{name} must be a finite number >= 0, got {value!r}")
        check_confidence(self.confidence, "GatePolicy.confidence")
        resamples = self.resamples
        if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < _MIN_POLICY_RESAMPLES:
            raise ValueError(f"GatePolicy.resamples must be an integer >= {_MIN_POLICY_RESAMPLES}, got {resamples!r}")


def check_confidence(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
