"""Progress lines are paced by time, so their number does not grow with the number of items."""

from __future__ import annotations

import pytest

from runtime_ops.progress import Every


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_not_due_before_the_interval_then_once_per_interval() -> None:
    clock = FakeClock()
    every = Every(10.0, clock)
    assert [every.due() for _ in range(1000)].count(True) == 0  # many items, no time: no line
    clock.t += 9.999
    assert not every.due()
    clock.t += 0.001
    assert every.due()
    assert not every.due()  # the interval restarts from the line just logged
    clock.t += 25.0  # a long pause yields one line, not a burst of catch-up lines
    assert every.due()
    assert not every.due()


def test_rejects_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        Every(0)
