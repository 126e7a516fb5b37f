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

A query without a click carries no preference and gets no outcome (`None`): it is neither a win nor a tie, so it
does not dilute the preference (Chapelle, Joachims, Radlinski and Yue, ACM TOIS 2012, count only queries with
clicks).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["RULES", "Credit", "CreditRule", "Outcome", "credit"]

CreditRule = Literal["examined_prefix", "team_draft"]
RULES: tuple[CreditRule, ...] = ("examined_prefix", "team_draft")
Outcome = Literal["win", "tie", "loss"]  # from the candidate's side


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


def credit(
    teams: Sequence[str],
    clicked: Collection[int],
    rule: CreditRule = "examined_prefix",
    *,
    names: tuple[str, str] = ("production", "candidate"),
) -> Credit | None:
    """The credit of one interleaved query: `teams[i]` is the team of the item shown at rank i + 1 (as
    `team_draft` drafted it), `clicked` the 1-based ranks the user clicked. `None` when nothing was clicked.

    `names` are the two team names, production's first, as given to `team_draft`.
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
    if not clicks:
        return None
    production, candidate = names
    if rule == "team_draft":
        counts = [teams[r - 1] for r in clicks]
        return Credit(float(counts.count(production)), float(counts.count(candidate)), len(teams), rule)
    examined = max(clicks)
    prefix = teams[:examined]
    rates: list[float] = []
    for team in names:
        shown = prefix.count(team)
        hits = sum(1 for r in clicks if teams[r - 1] == team)
        rates.append(hits / shown if shown else 0.0)
    return Credit(rates[0], rates[1], examined, rule)
