"""Interleaving credit: plain team-draft counting (the reference) and the examined-prefix rule (clicks through the
last click, each team's click-through rate on what it showed there)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_ops.online.click_models import PositionBased, grades
from runtime_ops.online.credit import RULES, CreditRule, common_prefix, credit
from runtime_ops.online.interleaving import team_draft
from runtime_ops.online.statistics import preference

P, C = "production", "candidate"


def test_no_click_is_no_outcome() -> None:
    assert credit([P, C, C, P], []) is None
    assert credit([P, C, C, P], [], "team_draft") is None


def test_team_draft_counts_clicks_per_team_anywhere() -> None:
    result = credit([P, C, C, P, P, C], [1, 5, 6], "team_draft")
    assert result is not None
    assert (result.production, result.candidate, result.outcome) == (2.0, 1.0, "loss")


def test_examined_prefix_compares_rates_on_the_ranks_through_the_last_click() -> None:
    # Prefix C P C (ranks 1-3): the candidate drafted one more examined item. Plain counting hands it the query
    # (2 clicks to 1); per examined item both teams were clicked on every item they showed: a tie.
    teams = [C, P, C, P]
    assert credit(teams, [1, 2, 3], "team_draft").outcome == "win"  # type: ignore[union-attr]
    balanced = credit(teams, [1, 2, 3], "examined_prefix")
    assert balanced is not None
    assert (balanced.production, balanced.candidate, balanced.examined, balanced.outcome) == (1.0, 1.0, 3, "tie")
    # An unclicked candidate item above the last click counts against it; one below does not.
    assert credit([C, P, C, P], [2]).outcome == "loss"  # type: ignore[union-attr]
    assert credit([P, C, P, C], [1]).outcome == "loss"  # type: ignore[union-attr]  # C showed nothing examined


def test_clicks_on_the_shared_prefix_credit_neither_team() -> None:
    # Both rankings start a, b: team draft shows a, b first whatever its coins, so who "drafted" them is chance.
    production, candidate = ["a", "b", "x", "y"], ["a", "b", "z", "x"]
    assert common_prefix(production, candidate) == 2
    assert common_prefix(["A", "b"], ["a", "c"], key=str.lower) == 1
    for seed in range(20):
        shown = team_draft(production, candidate, 4, random.Random(seed))
        teams = [d.team for d in shown]
        assert [d.item for d in shown[:2]] == ["a", "b"]
        for rule in RULES:
            assert credit(teams, [1, 2], rule, shared=2).outcome == "tie"  # type: ignore[union-attr]
            z_rank = [d.item for d in shown].index("z") + 1
            assert credit(teams, [1, z_rank], rule, shared=2).outcome == "win"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="shared must be between 0 and the 4 shown ranks"):
        credit(["production", "candidate", "candidate", "production"], [1], shared=5)


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(ValueError, match="not shown ranks"):
        credit([P, C], [3])
    with pytest.raises(ValueError, match="teams must be"):
        credit([P, "shadow"], [1])
    with pytest.raises(ValueError, match="unknown credit rule"):
        credit([P, C], [1], "balanced")  # type: ignore[arg-type]


@settings(max_examples=40)
@given(st.lists(st.sampled_from([P, C]), min_size=1, max_size=12), st.data())
def test_the_rules_agree_on_direction_when_each_team_shows_as_many_examined_items(
    teams: list[str], data: st.DataObject
) -> None:
    clicked = data.draw(st.sets(st.integers(1, len(teams)), min_size=1))
    prefix = teams[: max(clicked)]
    plain, rate = credit(teams, clicked, "team_draft"), credit(teams, clicked)
    assert plain is not None and rate is not None
    if prefix.count(P) == prefix.count(C):
        assert plain.outcome == rate.outcome
    swapped = credit([C if t == P else P for t in teams], clicked)  # the rule has no favourite team
    assert swapped is not None and (swapped.production, swapped.candidate) == (rate.candidate, rate.production)


@pytest.mark.parametrize("rule", RULES)
def test_a_user_who_clicks_at_random_prefers_neither(rule: CreditRule) -> None:
    # Clicks independent of the items: whatever the rankings, the coin of team draft leaves no preference.
    rng = random.Random(11)
    a, b = list(range(10)), list(range(5, 15))
    outcomes = []
    for _ in range(2000):
        shown = team_draft(a, b, 10, rng)
        clicked = [r for r in range(1, 11) if rng.random() < 0.3 / r]
        result = credit([d.team for d in shown], clicked, rule)
        if result is not None:
            outcomes.append(result.outcome)
    assert preference(outcomes).verdict == "no difference yet"


@pytest.mark.parametrize("rule", RULES)
def test_the_ranking_with_the_relevant_documents_on_top_wins(rule: CreditRule) -> None:
    rng = random.Random(3)
    relevant = {"d1", "d2"}
    production = ["x1", "x2", "d1", "x3", "x4", "d2"]
    candidate = ["d1", "d2", "x1", "x2", "x3", "x4"]
    model = PositionBased()
    outcomes = []
    for _ in range(300):
        shown = team_draft(production, candidate, 6, rng)
        clicked = model.clicks(grades([d.item for d in shown], relevant), rng)
        result = credit([d.team for d in shown], clicked, rule)
        if result is not None:
            outcomes.append(result.outcome)
    assert preference(outcomes).verdict == "better"
