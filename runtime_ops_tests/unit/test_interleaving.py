"""Team-draft interleaving: every shown item comes from one of the two rankings, once, with its team; each team's
items keep their ranking's order; neither team drafts two ahead of the other while both have items."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from runtime_ops.online.interleaving import team_draft

rankings = st.lists(st.integers(0, 30), unique=True, max_size=15)


@given(rankings, rankings, st.integers(0, 20), st.integers(0, 2**32 - 1))
def test_team_draft_invariants(a: list[int], b: list[int], k: int, seed: int) -> None:
    shown = team_draft(a, b, k, random.Random(seed))
    items = [d.item for d in shown]
    assert len(items) == len(set(items)) == min(k, len(set(a) | set(b)))
    for team, ranking in (("production", a), ("candidate", b)):
        mine = [d.item for d in shown if d.team == team]
        assert set(mine) <= set(ranking)
        assert mine == sorted(mine, key=ranking.index)
    if set(a).isdisjoint(b) and k <= 2 * min(len(a), len(b)):
        for n in range(len(shown) + 1):
            drafted_by_production = sum(d.team == "production" for d in shown[:n])
            assert abs(2 * drafted_by_production - n) <= 1  # in rounds: never two picks ahead


def test_the_same_seed_shows_the_same_list() -> None:
    a, b = list(range(10)), list(range(9, -1, -1))
    assert team_draft(a, b, 6, random.Random("req-1")) == team_draft(a, b, 6, random.Random("req-1"))


def test_identical_rankings_show_that_ranking() -> None:
    a = [5, 3, 8, 1]
    assert [d.item for d in team_draft(a, list(a), 4, random.Random(7))] == a


def test_first_pick_is_a_fair_coin() -> None:
    firsts = [team_draft([1], [2], 1, random.Random(seed))[0].team for seed in range(2000)]
    assert 900 < firsts.count("production") < 1100
