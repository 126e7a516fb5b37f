"""Token usage and its cost (pure): a reply's `usage` (prompt and completion tokens) times the per-1k prices."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Prices:
    prompt_per_1k: float = 0.0  # USD per 1,000 prompt tokens
    completion_per_1k: float = 0.0  # USD per 1,000 completion tokens

    def __post_init__(self) -> None:
        if self.prompt_per_1k < 0 or self.completion_per_1k < 0:
            raise ValueError(f"prices must be >= 0, got {self.prompt_per_1k} and {self.completion_per_1k}")

    def cost(self, usage: Usage) -> float:
        return usage.prompt_tokens / 1000 * self.prompt_per_1k + usage.completion_tokens / 1000 * self.completion_per_1k


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def total_usage(usages: Iterable[Usage]) -> Usage:
    return sum(usages, Usage())


def total_cost(costs: Iterable[float]) -> float:
    """The sum of costs in USD, rounded to a millionth of a dollar (float sums drift in the last digits)."""
    return round(sum(costs), 6)
