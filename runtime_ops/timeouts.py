"""Deadlines on the main thread: `with deadline(seconds, what):` ends the block with `DeadlineExceeded` once
`seconds` have passed (a SIGALRM interrupts the Python code running then, and the block raises).

Deadlines nest: a step's deadline holds around each document's parse deadline, and whichever is due first
fires; the exception names its own deadline, so a parse that outlives the whole step's time fails the step
instead of quarantining one document. Off the main thread (where Python delivers no signals) a deadline cannot
be armed: the block runs unbounded and `armed` says so. A C call (a database round trip, a matrix product) is
interrupted when it returns to Python: database statements have their own timeout (store.engine).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType


@dataclass(eq=False)
class Deadline:
    what: str
    seconds: float
    due: float = field(default=0.0)
    armed: bool = True
    raised_at: float | None = None


class DeadlineExceeded(TimeoutError):
    """Raised by the `with deadline(...)` block whose time ran out (an ordinary exception: a step fails with it and
    its retry policy applies)."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(f"{deadline.what} took longer than its {_human(deadline.seconds)} timeout")
        self.deadline = deadline


class _Interrupt(BaseException):
    """What the signal raises inside the block: like KeyboardInterrupt, no `except Exception` in the interrupted
    code (a parser that reports any error as a corrupt file) can swallow it. Its own `deadline()` turns it into
    DeadlineExceeded."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(deadline.what)
        self.deadline = deadline


_active: list[Deadline] = []
REFIRE_S = 0.1


def _human(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _arm() -> None:
    if not _active:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return
    left = min(d.due for d in _active) - time.monotonic()
    # Periodic from the first due time on: an interrupt raised where Python cannot propagate it (inside a
    # weakref callback or a __del__ run by the garbage collector, which report it as "ignored") is raised again.
    signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), REFIRE_S)


def _fire(signum: int, frame: FrameType | None) -> None:
    now = time.monotonic()
    due = [d for d in _active if d.due <= now + 0.001]
    if not due:
        _arm()  # woke early (a re-arm raced the clock): wait for the rest
        return
    # The outermost due deadline wins: its block is the one that must stop.
    target = due[0]
    if target.raised_at is not None and now - target.raised_at < REFIRE_S / 2:
        return  # just raised: it is on its way out of the block
    target.raised_at = now
    raise _Interrupt(target)


@contextmanager
def _alarm_blocked() -> Iterator[None]:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})


@contextmanager
def deadline(seconds: float | None, what: str) -> Iterator[Deadline]:
    """Bound the block to `seconds` (None or <= 0: unbounded)."""
    entry = Deadline(what, float(seconds or 0))
    if not seconds or seconds <= 0 or threading.current_thread() is not threading.main_thread():
        entry.armed = False
        yield entry
        return
    with _alarm_blocked():
        previous = signal.getsignal(signal.SIGALRM) if not _active else None
        if not _active:
            signal.signal(signal.SIGALRM, _fire)
        entry.due = time.monotonic() + seconds
        _active.append(entry)
        _arm()
    try:
        yield entry
    except _Interrupt as interrupt:
        if interrupt.deadline is not entry:
            raise  # an outer deadline's: it passes through to its own block
        raise DeadlineExceeded(entry) from None
    finally:
        # No alarm between leaving the list and re-arming for the deadlines still open (one that arrives is held
        # and handled on unblocking, against the remaining deadlines).
        with _alarm_blocked():
            _active.remove(entry)
            if _active:
                _arm()
            else:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
