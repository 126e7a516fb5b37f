"""Simulated users for tests and benchmarks: which ranks of a shown list get clicked, given each item's relevance.

Relevance is a grade 0..n per shown item (from a golden set: `grades` turns "is this document relevant" into
0 / 1, or takes graded judgements); every draw comes from the caller's seeded `random.Random`, so a simulation
repeats exactly.

- `PositionBased` (Richardson et al., WWW 2007; Craswell et al., WSDM 2008): each item is clicked independently
  with P(examined at rank r) x P(attractive | grade), examination falling as 1 / r^eta.
- `Cascade` (Craswell et al., WSDM 2008, with the satisfaction stop of the dependent click model, Guo et al.,
  WSDM 2009): the user scans down from rank 1, clicks an item with P(click | grade), and after a click stops with
  P(satisfied | grade); otherwise goes on to the next rank until the list ends.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["Cascade", "ClickModel", "PositionBased", "grades"]

T = TypeVar("T")


class ClickModel(Protocol):
    @property
    def name(self) -> str: ...

    def clicks(self, grades: Sequence[int], rng: random.Random) -> list[int]:
        """The 1-based ranks clicked, ascending, on a list whose item at rank i + 1 has relevance `grades[i]`."""
        ...


def grades(items: Sequence[T], relevance: Collection[T] | Mapping[T, int]) -> list[int]:
    """Each item's grade: its value in a graded `relevance` mapping (absent: 0), or 1 / 0 for membership of a set
    of relevant items (a golden question's relevant documents)."""
    if isinstance(relevance, Mapping):
        return [int(relevance.get(item, 0)) for item in items]
    return [1 if item in relevance else 0 for item in items]


def _probabilities(name: str, values: Sequence[float]) -> tuple[float, ...]:
    if not values:
        raise ValueError(f"{name} needs one probability per relevance grade, got none")
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError(f"{name} are probabilities between 0 and 1, got {list(values)}")
    return tuple(values)


def _grade(per_grade: tuple[float, ...], grade: int) -> float:
    if not 0 <= grade < len(per_grade):
        raise ValueError(f"relevance grade {grade} is outside 0..{len(per_grade) - 1} (the model's grades)")
    return per_grade[grade]


@dataclass(frozen=True)
class PositionBased:
    """`attractive[g]`: the click probability of an examined item of grade g; examination at rank r is 1 / r^eta."""

    attractive: tuple[float, ...] = (0.05, 0.8)
    eta: float = 1.0
    name: str = "position-based"

    def __post_init__(self) -> None:
        _probabilities("attractive", self.attractive)
        if self.eta < 0:
            raise ValueError(f"eta must be >= 0 (0: every rank examined), got {self.eta}")

    def examination(self, rank: int) -> float:
        return 1.0 / rank**self.eta

    def clicks(self, grades: Sequence[int], rng: random.Random) -> list[int]:
        return [
            rank
            for rank, grade in enumerate(grades, start=1)
            if rng.random() < self.examination(rank) * _grade(self.attractive, grade)
        ]


@dataclass(frozen=True)
class Cascade:
    """`click[g]`: P(click) on reaching an item of grade g; `satisfied[g]`: P(stop scanning) after clicking it."""

    click: tuple[float, ...] = (0.05, 0.8)
    satisfied: tuple[float, ...] = (0.1, 0.7)
    name: str = "cascade"

    def __post_init__(self) -> None:
        _probabilities("click", self.click)
        _probabilities("satisfied", self.satisfied)
        if len(self.click) != len(self.satisfied):
            raise ValueError(
                f"click has {len(self.click)} grades and satisfied {len(self.satisfied)}: give both per grade"
            )

    def clicks(self, grades: Sequence[int], rng: random.Random) -> list[int]:
        clicked: list[int] = []
        for rank, grade in enumerate(grades, start=1):
            if rng.random() < _grade(self.click, grade):
                clicked.append(rank)
                if rng.random() < _grade(self.satisfied, grade):
                    break
        return clicked
