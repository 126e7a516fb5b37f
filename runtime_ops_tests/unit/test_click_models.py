"""Click models: seeded, bounded to the shown ranks, and clicking relevant items more (position-based: less deep
in the list; cascade: never below a satisfying click)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_ops.online.click_models import Cascade, PositionBased, grades

MODELS = [PositionBased(), PositionBased(eta=0.5, attractive=(0.1, 0.4, 0.9)), Cascade()]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@settings(max_examples=40)
@given(st.lists(st.integers(0, 1), max_size=20), st.integers(0, 2**32 - 1))
def test_clicks_are_shown_ranks_ascending_and_repeat_with_the_seed(
    model: PositionBased | Cascade, shown: list[int], seed: int
) -> None:
    clicks = model.clicks(shown, random.Random(seed))
    assert clicks == sorted(set(clicks))
    assert all(1 <= r <= len(shown) for r in clicks)
    assert clicks == model.clicks(shown, random.Random(seed))


def test_position_based_clicks_relevant_items_more_and_deep_ranks_less() -> None:
    model, rng = PositionBased(), random.Random(1)
    counts = [0] * 4
    for _ in range(5000):
        for r in model.clicks([1, 0, 1, 0], rng):
            counts[r - 1] += 1
    # expected shares: 0.8, 0.025, 0.267, 0.0125
    assert counts[0] > counts[2] > counts[1] > counts[3]
    assert 3700 < counts[0] < 4300 and 1150 < counts[2] < 1500


def test_cascade_stops_after_a_satisfying_click() -> None:
    always = Cascade(click=(0.0, 1.0), satisfied=(0.0, 1.0))
    assert always.clicks([0, 1, 1, 1], random.Random(0)) == [2]
    never_satisfied = Cascade(click=(0.0, 1.0), satisfied=(0.0, 0.0))
    assert never_satisfied.clicks([0, 1, 0, 1], random.Random(0)) == [2, 4]


def test_grades_from_a_golden_question_or_graded_judgements() -> None:
    assert grades(["a", "b", "c"], {"b"}) == [0, 1, 0]
    assert grades(["a", "b", "c"], {"a": 2, "c": 1}) == [2, 0, 1]


def test_bad_models_and_grades_name_the_problem() -> None:
    with pytest.raises(ValueError, match="probabilities between 0 and 1"):
        PositionBased(attractive=(0.1, 1.5))
    with pytest.raises(ValueError, match="eta must be"):
        PositionBased(eta=-1)
    with pytest.raises(ValueError, match="give both per grade"):
        Cascade(click=(0.1, 0.5, 0.9), satisfied=(0.1, 0.5))
    with pytest.raises(ValueError, match=r"grade 2 is outside 0\.\.1"):
        PositionBased().clicks([0, 2], random.Random(0))
