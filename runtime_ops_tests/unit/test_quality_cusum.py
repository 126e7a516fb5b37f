"""The CUSUM on production's helpful share (`online/quality_cusum.py`): quiet on a stable stream, loud within minutes
of a 20 % drop, blind until its reference is large enough, and never comparing a drop with itself."""

from __future__ import annotations

import math
import random

import pytest

from runtime_ops.online.quality_cusum import DEFAULT_DESIGN, CusumDesign, QualityCusum


def _stream(cusum: QualityCusum, rng: random.Random, share: float, bins: int, per_bin: int = 30) -> float:
    """Feed `bins` bins of `per_bin` judgements, each helpful with probability `share`; the highest statistic seen."""
    highest = 0.0
    for _ in range(bins):
        helpful = sum(rng.random() < share for _ in range(per_bin))
        highest = max(highest, cusum.add(helpful, per_bin))
    return highest


def test_a_stable_stream_stays_below_the_threshold_for_a_day() -> None:
    cusum = QualityCusum()
    highest = _stream(cusum, random.Random(7), 0.75, bins=24 * 120)  # 24 h of 30 s bins at 1 judgement/s
    assert cusum.ready and highest < DEFAULT_DESIGN.threshold
    assert cusum.reference_share == pytest.approx(0.75, abs=0.01)


def test_a_20_percent_drop_crosses_the_threshold_within_minutes_without_a_day_of_history() -> None:
    cusum, rng = QualityCusum(), random.Random(11)
    assert _stream(cusum, rng, 0.75, bins=60) < DEFAULT_DESIGN.threshold  # 30 minutes since the promotion
    bins_to_alarm = None
    for n in range(1, 41):
        cusum.add(sum(rng.random() < 0.6 for _ in range(30)), 30)
        if cusum.alarm():
            bins_to_alarm = n
            break
    assert bins_to_alarm is not None, "a drop from 0.75 to 0.60 went unnoticed for 20 minutes"
    assert bins_to_alarm <= 16  # 8 minutes of 30 s bins


def test_nothing_is_tested_before_the_reference_holds_enough_judgements() -> None:
    cusum = QualityCusum(CusumDesign(reference_lag=2, min_reference=100))
    for _ in range(5):  # bins 1-3 reach the reference only after the lag of 2 bins: 90 judgements in it
        assert cusum.add(0, 30) == 0.0
    assert not cusum.ready and cusum.reference_share is None
    cusum.add(0, 30)
    assert cusum.ready and cusum.reference_judged == 120


def test_the_lag_keeps_the_recent_bins_out_of_the_reference() -> None:
    design = CusumDesign(reference_lag=3, min_reference=30)
    cusum = QualityCusum(design)
    cusum.add(30, 30)  # all helpful: the reference to come
    for _ in range(3):
        cusum.add(0, 30)  # a collapse: compared with the past, not yet part of it
    assert cusum.reference_helpful == 30 and cusum.reference_judged == 30
    cusum.add(0, 30)
    assert (cusum.reference_helpful, cusum.reference_judged) == (30, 60)


def test_each_bin_adds_its_log_likelihood_ratio_and_the_statistic_never_goes_below_zero() -> None:
    design = CusumDesign(drop=0.2, reference_lag=0, min_reference=9)
    cusum = QualityCusum(design)
    cusum.add(6, 9)  # reference: (6 + 0.5) / (9 + 1) = 0.65 once the bin is in
    p0 = 0.65
    p1 = p0 * 0.8
    expected = 1 * math.log(p1 / p0) + 3 * math.log((1 - p1) / (1 - p0))
    assert cusum.add(1, 4) == pytest.approx(expected)
    assert cusum.add(40, 40) == 0.0  # a good bin brings it back to 0, not below
    assert cusum.add(0, 0) == 0.0  # a quiet bin changes nothing but time


def test_a_reference_of_only_helpful_judgements_does_not_make_one_not_helpful_infinite() -> None:
    cusum = QualityCusum(CusumDesign(reference_lag=0, min_reference=10))
    cusum.add(10, 10)
    assert math.isfinite(cusum.add(0, 1)) and cusum.statistic < DEFAULT_DESIGN.threshold


def test_a_copy_runs_on_without_moving_the_original() -> None:
    cusum = QualityCusum(CusumDesign(reference_lag=1, min_reference=10))
    cusum.add(10, 10)
    cusum.add(8, 10)
    twin = cusum.copy()
    twin.add(0, 30)
    twin.add(0, 30)
    assert twin.statistic > 0 and cusum.statistic == 0.0
    assert (cusum.reference_judged, cusum.bins) == (10, 2) and twin.bins == 4


@pytest.mark.parametrize(("helpful", "judged"), [(-1, 3), (4, 3)])
def test_an_impossible_bin_is_refused(helpful: int, judged: int) -> None:
    with pytest.raises(ValueError, match="helpful <= judged"):
        QualityCusum().add(helpful, judged)


def test_a_design_outside_its_range_is_refused() -> None:
    with pytest.raises(ValueError, match="drop must be between 0 and 1"):
        CusumDesign(drop=1.0)
    with pytest.raises(ValueError, match="threshold"):
        CusumDesign(threshold=0)
