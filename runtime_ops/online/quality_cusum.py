"""A one-sided Bernoulli CUSUM on production's helpful share, against production's own past since its promotion.

The day-over-day alert (`RetrievalQualityRegressed`) needs a day of history; this statistic needs none. Production's
`helpful` / `not_helpful` judgements arrive in time bins (`bin_seconds` each, empty bins included). Each bin is
tested against the *reference*: every judgement since the promotion except the last `reference_lag` bins, so a drop
is compared with what came before it and not with itself (the drop reaches the reference only after the lag, long
after a sharp drop has been detected). With the reference share p0 and the designed drop p1 = p0 · (1 - drop), a
bin with k helpful of n judged adds its log-likelihood ratio

    k · ln(p1 / p0) + (n - k) · ln((1 - p1) / (1 - p0))

to the statistic, which never goes below 0 (Page 1954; the Bernoulli form: Reynolds and Stoumbos 1999). It drifts
down while the share holds and climbs at about KL(p || p0-vs-p1) per judgement once it fell; crossing `threshold`
means "the share fell by about `drop` or more", with a false alarm about once in e^threshold judgements of a stable
stream. Nothing is added until the reference holds `min_reference` judgements (a fresh production has no past).

p0 is estimated with half a judgement added to each side (never exactly 0 or 1: a reference of only helpful
judgements would make one `not_helpful` infinitely damning). Pure: no I/O, no Dagster.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

__all__ = ["DEFAULT_DESIGN", "HELPFUL", "JUDGEMENTS", "CusumDesign", "QualityCusum"]

# The feedback signals that judge a shown result (a click is no judgement: users click what turns out useless too).
HELPFUL = "helpful"
JUDGEMENTS = (HELPFUL, "not_helpful")


@dataclass(frozen=True)
class CusumDesign:
    """The test's constants. The defaults detect a 20 % drop at 1 judgement/s in about 4 minutes and stay below
    the threshold through days of a stable stream (bench/quality_alerts.py measures both)."""

    drop: float = 0.15  # the relative drop of the helpful share the test is tuned to (p1 = p0 · (1 - drop))
    threshold: float = 12.0  # the alarm level (the rule compares the gauge with it)
    bin_seconds: int = 30
    reference_lag: int = 30  # bins: 15 minutes at 30 s
    min_reference: int = 300  # judgements in the reference before anything is tested

    def __post_init__(self) -> None:
        if not 0 < self.drop < 1:
            raise ValueError(f"drop must be between 0 and 1 (exclusive), not {self.drop}")
        if self.threshold <= 0 or self.bin_seconds <= 0 or self.reference_lag < 0 or self.min_reference < 1:
            raise ValueError("threshold and bin_seconds must be positive, reference_lag >= 0, min_reference >= 1")


DEFAULT_DESIGN = CusumDesign()


@dataclass
class QualityCusum:
    """The statistic of one production model version, fed bin by bin in time order (`add`)."""

    design: CusumDesign = DEFAULT_DESIGN
    statistic: float = 0.0
    reference_helpful: int = 0
    reference_judged: int = 0
    bins: int = 0  # bins added so far
    _recent: deque[tuple[int, int]] = field(default_factory=deque[tuple[int, int]])

    @property
    def ready(self) -> bool:
        return self.reference_judged >= self.design.min_reference

    @property
    def reference_share(self) -> float | None:
        """The smoothed reference share p0, or None before the reference is large enough."""
        if not self.ready:
            return None
        return (self.reference_helpful + 0.5) / (self.reference_judged + 1)

    def copy(self) -> QualityCusum:
        """An independent copy (the collector tests bins that may still grow on a copy, keeping the settled state)."""
        twin = replace(self)
        twin._recent = deque(self._recent)
        return twin

    def alarm(self) -> bool:
        return self.statistic >= self.design.threshold

    def add(self, helpful: int, judged: int) -> float:
        """Test one bin (`helpful` of `judged` judgements; 0 of 0 for a quiet bin) and return the statistic."""
        if not 0 <= helpful <= judged:
            raise ValueError(f"a bin holds 0 <= helpful <= judged, not {helpful} of {judged}")
        p0 = self.reference_share
        if p0 is not None and judged:
            p1 = p0 * (1 - self.design.drop)
            llr = helpful * math.log(p1 / p0) + (judged - helpful) * math.log((1 - p1) / (1 - p0))
            self.statistic = max(0.0, self.statistic + llr)
        self._recent.append((helpful, judged))
        if len(self._recent) > self.design.reference_lag:
            old_helpful, old_judged = self._recent.popleft()
            self.reference_helpful += old_helpful
            self.reference_judged += old_judged
        self.bins += 1
        return self.statistic
