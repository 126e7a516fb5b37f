"""How clicks on a team-draft interleaved list credit the two teams, and which team a query prefers.

Two rules, both from the interleaving literature:

- `team_draft` (the reference; Radlinski, Kurup and Joachims, CIKM 2008): each team's credit is the number of
  clicks on the items it drafted, anywhere in the list; the team with more clicks wins the query.
- `examined_prefix` (the default): position-aware. The user is taken to have examined every item down to the last
  click and nothing below it (the "clicks above the last click" assumption of Joachims, KDD 2002, and the cascade
  model of Craswell et al., WSDM 2008). A team's credit is its click-through rate on its *examined* items: clicks
  on its items in that prefix divided by how many of its items the prefix holds. Team draft keeps the two teams'
  counts within one of each other in every prefix, and that one extra item is the only place the rules differ: a
  prefix ending on the first pick of a round holds one more item of the team that picked first, which under plain
  counting is one more chance of a click. Comparing rates takes that chance away, so a query whose user clicked
  equally often on what each team showed is a tie, not a win for whoever happened to pick first. Unclicked items
  below the last click are never evidence against a team: the user need not have seen them.

Either rule can also be told how many leading ranks are `shared`: the longest common prefix of the two rankings
(`common_prefix`). Team draft shows that prefix first, in order, whichever way its coins fall, so the team an item
there is credited to is the coin's choice, not a difference between the rankings: a click there is noise, and with
`shared` it credits neither team (a query clicked only there is a tie). Balanced interleaving (Joachims 2003) has
the same property by construction. When two models agree on the top result, as good models mostly do, plain
team-draft counting turns most clicks into coin flips; leaving them out is what makes a small difference visible.

A query without a click carries no preference and gets no outcome (`None`): it is neither a win nor a tie, so it
does not dilute the preference (Chapelle, Joachims, Radlinski and Yue, ACM TOIS 2012, count only queries with
clicks).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = ["RULES", "Credit", "CreditRule", "Outcome", "common_prefix", "credit"]

CreditRule = Literal["examined_prefix", "team_draft"]
RULES: tuple[CreditRule, ...] = ("examined_prefix", "team_draft")
Outcome = Literal["win", "tie", "loss"]  # from the candidate's side
T = TypeVar("T")


@dataclass(frozen=True)
class Credit:
    """One query's credit: `production` and `candidate` are click counts (`team_draft`) or click-through rates on
    examined items (`examined_prefix`); `examined` is how many ranks the rule looked at."""

    production: float
    candidate: float
    examined: int
    rule: CreditRule

    @property
    def outcome(self) -> Outcome:
        """The candidate's result on this query."""
        if self.candidate > self.production:
            return "win"
        if self.candidate < self.production:
            return "loss"
        return "tie"


def common_prefix(first: Sequence[T], second: Sequence[T], *, key: Callable[[T], Hashable] = lambda item: item) -> int:
    """How many leading items two rankings share, in the same order: the ranks of an interleaved list that are
    `shared` (team draft shows them first whatever its coins)."""
    n = 0
    for a, b in zip(first, second, strict=False):
        if key(a) != key(b):
            break
        n += 1
    return n


def credit(
    teams: Sequence[str],
    clicked: Collection[int],
    rule: CreditRule = "examined_prefix",
    *,
    shared: int = 0,
    names: tuple[str, str] = ("production", "candidate"),
) -> Credit | None:
    """The credit of one interleaved query: `teams[i]` is the team of the item shown at rank i + 1 (as
    `team_draft` drafted it), `clicked` the 1-based ranks the user clicked. `None` when nothing was clicked.

    `shared`: the first `shared` ranks hold the rankings' common prefix (`common_prefix`); clicks there credit
    neither team. `names` are the two team names, production's first, as given to `team_draft`.
    """
    if rule not in RULES:
        raise ValueError(f"unknown credit rule {rule!r}: use one of {', '.join(RULES)}")
    strange = sorted({str(t) for t in teams if t not in names})
    if strange:
        raise ValueError(f"teams must be {names[0]!r} or {names[1]!r}, got {', '.join(strange)}")
    clicks = set(clicked)  # a rank clicked twice is one click: a repeat says nothing new
    outside = sorted(r for r in clicks if not 1 <= r <= len(teams))
    if outside:
        raise ValueError(f"clicked ranks {outside} are not shown ranks (1..{len(teams)})")
    if not 0 <= shared <= len(teams):
        raise ValueError(f"shared must be between 0 and the {len(teams)} shown ranks, got {shared}")
    if not clicks:
        return None
    production, candidate = names
    credited = [r for r in clicks if r > shared]
    if rule == "team_draft":
        counts = [teams[r - 1] for r in credited]
        return Credit(float(counts.count(production)), float(counts.count(candidate)), len(teams), rule)
    examined = max(clicks)
    prefix = teams[shared:examined]
    rates: list[float] = []
    for team in names:
        shown = prefix.count(team)
        hits = sum(1 for r in credited if teams[r - 1] == team)
        rates.append(hits / shown if shown else 0.0)
    return Credit(rates[0], rates[1], examined, rule)
