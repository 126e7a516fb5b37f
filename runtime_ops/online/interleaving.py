"""Team-draft interleaving (Radlinski, Kurup and Joachims, CIKM 2008): one shown list from two rankings, each shown
item remembering the team (ranking) that put it there.

Per query a coin flip picks which team drafts first in each round; in turn each team adds its highest-ranked item
not yet shown. The coin comes from the caller's `random.Random`, seeded from the request id, so the list a request
showed can be rebuilt from the logged rankings.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Drafted(Generic[T]):
    item: T
    team: str  # the name of the ranking that drafted it


def team_draft(
    first: Sequence[T],
    second: Sequence[T],
    k: int,
    rng: random.Random,
    *,
    teams: tuple[str, str] = ("production", "candidate"),
    key: Callable[[T], Hashable] = lambda item: item,  # type: ignore[return-value]
) -> list[Drafted[T]]:
    """At most `k` items from `first` (team `teams[0]`) and `second` (team `teams[1]`), interleaved by team draft.

    Items are the same when their `key` is (a chunk id): an item both rankings hold is shown once, for the team
    that drafted it first. When one ranking runs out, the other fills the rest.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    shown: list[Drafted[T]] = []
    seen: set[Hashable] = set()
    rankings = (list(first), list(second))
    next_at = [0, 0]

    def draft(team: int) -> bool:
        ranking = rankings[team]
        while next_at[team] < len(ranking):
            item = ranking[next_at[team]]
            next_at[team] += 1
            if key(item) not in seen:
                seen.add(key(item))
                shown.append(Drafted(item, teams[team]))
                return True
        return False

    while len(shown) < k:
        order = (0, 1) if rng.random() < 0.5 else (1, 0)
        progressed = False
        for team in order:
            if len(shown) >= k:
                break
            progressed = draft(team) or progressed
        if not progressed:
            break
    return shown
