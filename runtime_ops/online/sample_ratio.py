"""The sample-ratio-mismatch check (pure): does a rollout's split of traffic match the share it declared?

Experimentation platforms (GrowthBook, Statsig, Optimizely) run it before reading any result: when the arms' counts
differ from the declared split by more than chance allows, something between assignment and logging is broken or
steered (requests dropped on one arm, a client choosing which sessions to send), and no comparison of the arms can
be trusted. The test is Pearson's chi-square goodness of fit of the two observed counts against the declared
share, with one degree of freedom, whose tail is exactly erfc(sqrt(x / 2)); a mismatch is p < `SRM_P` (0.001, the
platforms' default: a healthy rollout is flagged once in a thousand checks).

The counted units are what the rollout assigns: requests for interleaving, sessions for a canary (a request
without a session is a session of its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["MIN_EXPECTED", "SRM_P", "SampleRatio", "sample_ratio"]

SRM_P = 0.001
MIN_EXPECTED = 5  # the chi-square approximation needs about this many expected units in each arm


@dataclass(frozen=True)
class SampleRatio:
    """`treated` units in the rollout's arm and `control` in production's, against the declared `share`."""

    treated: int
    control: int
    share: float
    chi_square: float
    p: float

    @property
    def mismatch(self) -> bool:
        return self.p < SRM_P

    def text(self) -> str:
        split = f"{self.share:.0%}/{1 - self.share:.0%}"
        return f"sample ratio mismatch: {self.treated} vs {self.control} for a {split} split, p={self.p:.1g}"

    def to_dict(self) -> dict[str, float | int | bool]:
        return {"treated": self.treated, "control": self.control, "share": self.share, "chi_square": self.chi_square,
                "p": self.p, "mismatch": self.mismatch}  # fmt: skip


def sample_ratio(treated: int, control: int, share: float) -> SampleRatio | None:
    """The check of `treated` vs `control` units against the declared `share` of the treated arm; None when it
    cannot be run: a share of 0 or 1 (nothing to compare) or too few units for the approximation."""
    if not 0 < share < 1:
        return None
    n = treated + control
    expected_treated, expected_control = n * share, n * (1 - share)
    if min(expected_treated, expected_control) < MIN_EXPECTED:
        return None
    x = (treated - expected_treated) ** 2 / expected_treated + (control - expected_control) ** 2 / expected_control
    return SampleRatio(treated, control, share, x, math.erfc(math.sqrt(x / 2)))
