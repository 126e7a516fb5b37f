"""When a long loop should say how far it got: by elapsed time, not by item count.

A Dagster `context.log` line is an event-log write (one committed row, on SQLite an fsync), so a line every
N items makes logging cost grow with the batch (2,000 documents at one line per 200 were ~20 writes, a
measurable share of the pipeline benchmark's overhead). A time cadence keeps it to one line per interval
however many items there are, and a short run logs nothing in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Every:
    """`due()` is True at most once per `seconds`, first when `seconds` have passed since construction."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        self._seconds = seconds
        self._clock = clock
        self._last = clock()

    def due(self) -> bool:
        now = self._clock()
        if now - self._last < self._seconds:
            return False
        self._last = now
        return True
