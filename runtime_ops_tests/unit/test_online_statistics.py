"""The online comparison's intervals: their known values, their coverage on seeded simulations, and bad input."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_ops.online.click_models import Cascade, grades
from runtime_ops.online.credit import Outcome, credit
from runtime_ops.online.interleaving import team_draft
from runtime_ops.online.statistics import (
    mean_difference,
    mean_estimate,
    overlap_at_k,
    preference,
    preference_from_counts,
    proportion_difference,
    shadow,
    wilson,
)


def test_wilson_matches_published_values() -> None:
    # Newcombe (1998), table I: 81/263 -> 0.2553 to 0.3662; 0/10 -> 0 to 0.2775.
    low, high = wilson(81, 263).low, wilson(81, 263).high
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    assert round(wilson(0, 10).high, 4) == 0.2775 and wilson(0, 10).low == 0.0


def test_newcombe_difference_matches_the_published_example() -> None:
    # Newcombe (1998), table II example (56/70 vs 48/80): difference 0.2, method 10 gives 0.0524 to 0.3339.
    result = proportion_difference(56, 70, 48, 80)
    assert math.isclose(result.difference, 0.2)
    assert (round(result.interval.low, 4), round(result.interval.high, 4)) == (0.0524, 0.3339)
    assert result.verdict == "better" and result.queries == 150


def test_preference_counts_and_verdicts() -> None:
    result = preference_from_counts(wins=60, ties=20, losses=20)
    assert result.queries == 100 and math.isclose(result.delta, 0.4)
    assert 0 < result.interval.low < 0.4 < result.interval.high and result.verdict == "better"
    assert preference("loss" if i < 30 else "tie" for i in range(35)).verdict == "worse"
    assert preference(["win", "loss", "tie"]).verdict == "no difference yet"
    nothing = preference([])
    assert (nothing.queries, nothing.delta, nothing.verdict) == (0, 0.0, "no difference yet")


@settings(max_examples=60)
@given(st.integers(0, 200), st.integers(0, 200), st.integers(0, 200))
def test_the_preference_interval_holds_its_estimate_within_minus_one_to_one(wins: int, ties: int, losses: int) -> None:
    result = preference_from_counts(wins, ties, losses)
    assert -1.0 <= result.interval.low <= result.delta <= result.interval.high <= 1.0
    mirrored = preference_from_counts(losses, ties, wins)
    assert math.isclose(mirrored.interval.low, -result.interval.high, abs_tol=1e-12)


def _interleaved_outcomes(first: list[str], second: list[str], relevant: set[str], n: int, seed: int) -> list[Outcome]:
    rng, model = random.Random(seed), Cascade()
    outcomes: list[Outcome] = []
    for _ in range(n):
        shown = team_draft(first, second, 6, rng)
        result = credit([d.team for d in shown], model.clicks(grades([d.item for d in shown], relevant), rng))
        if result is not None:
            outcomes.append(result.outcome)
    return outcomes


def test_on_identical_rankings_the_interval_covers_zero_in_at_least_90_percent_of_runs() -> None:
    ranking = ["a", "b", "c", "d", "e", "f"]
    covered = sum(
        preference(_interleaved_outcomes(ranking, list(ranking), {"b", "e"}, 60, seed)).verdict == "no difference yet"
        for seed in range(100)
    )
    assert covered >= 90


def test_a_clearly_better_candidate_wins_in_almost_every_run() -> None:
    production, candidate = ["a", "b", "c", "d", "e", "f"], ["e", "b", "a", "c", "d", "f"]
    better = sum(
        preference(_interleaved_outcomes(production, candidate, {"e"}, 60, seed)).verdict == "better"
        for seed in range(50)
    )
    assert better >= 45


def test_proportion_difference_covers_the_true_difference() -> None:
    # Two arms with true rates 0.30 and 0.25: the interval holds 0.05 in about 95 % of seeded runs.
    rng = random.Random(5)
    covered = 0
    for _ in range(200):
        c = sum(rng.random() < 0.30 for _ in range(400))
        p = sum(rng.random() < 0.25 for _ in range(400))
        interval = proportion_difference(c, 400, p, 400).interval
        covered += interval.low <= 0.05 <= interval.high
    assert covered >= 180


def test_click_mrr_per_arm_and_difference() -> None:
    candidate = [1.0, 0.5, 1.0, 0.0, 1.0, 0.5] * 20
    production = [0.5, 0.0, 1 / 3, 0.0, 1.0, 0.0] * 20
    result = mean_difference(candidate, production)
    assert math.isclose(result.candidate.mean, 4 / 6) and result.candidate.queries == 120
    assert math.isclose(result.difference, 4 / 6 - (11 / 6) / 6)
    assert result.verdict == "better" and result.queries == 240
    one = mean_estimate([0.5])
    assert one.queries == 1 and math.isinf(one.interval.high)  # one value knows no spread


def test_shadow_overlap_and_latency_ratio() -> None:
    assert overlap_at_k(["a", "b", "c", "d"], ["c", "a", "x", "y"], 2) == 0.5
    result = shadow([1.0, 0.8, 0.9, 0.7], [20.0, 22.0, 18.0, 40.0], [10.0, 11.0, 9.0, 20.0], k=10)
    assert result.queries == 4 and math.isclose(result.latency_ratio, 2.0)
    assert math.isclose(result.overlap.mean, 0.85)
    assert math.isclose(result.latency_interval.low, 2.0) and math.isclose(result.latency_interval.high, 2.0)


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(ValueError, match="exceeds n"):
        wilson(5, 3)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        preference_from_counts(1, 0, 0, confidence=95)
    with pytest.raises(ValueError, match="'win', 'tie' or 'loss'"):
        preference(["draw"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="latencies are paired"):
        shadow([1.0], [1.0, 2.0], [1.0], k=10)
    with pytest.raises(ValueError, match="must be positive"):
        shadow([1.0], [0.0], [1.0], k=10)
