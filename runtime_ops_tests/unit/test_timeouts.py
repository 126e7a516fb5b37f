"""Deadlines: a block past its time is interrupted with the deadline named; nested deadlines fire in order."""

import re
import threading
import time

import pytest

from runtime_ops.timeouts import DeadlineExceeded, deadline


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # pure Python: the signal lands between bytecodes
        pass


def test_a_block_past_its_deadline_is_interrupted_naming_it() -> None:
    started = time.monotonic()
    expected = re.escape("parsing a.pdf took longer than its 0.2 s timeout")
    with pytest.raises(DeadlineExceeded, match=expected) as caught, deadline(0.2, "parsing a.pdf"):
        _spin(5)
    assert time.monotonic() - started < 2
    assert caught.value.deadline.what == "parsing a.pdf"


def test_a_block_within_its_deadline_is_untouched_and_the_timer_is_cleared() -> None:
    with deadline(0.5, "quick"):
        _spin(0.05)
    _spin(0.7)  # nothing fires after the block


def test_the_inner_deadline_fires_first_and_the_outer_holds_afterwards() -> None:
    with pytest.raises(DeadlineExceeded) as outer_fired, deadline(0.6, "the step") as step:
        with pytest.raises(DeadlineExceeded) as inner_fired, deadline(0.1, "one document") as doc:
            _spin(5)
        assert inner_fired.value.deadline is doc
        _spin(5)
    assert outer_fired.value.deadline is step


def test_an_outer_deadline_due_first_names_the_outer_block() -> None:
    with pytest.raises(DeadlineExceeded) as fired, deadline(0.1, "the step") as step, deadline(5, "one document"):
        _spin(5)
    assert fired.value.deadline is step


def test_off_the_main_thread_a_deadline_is_not_armed() -> None:
    seen: list[bool] = []

    def work() -> None:
        with deadline(0.01, "in a thread") as d:
            seen.append(d.armed)
            _spin(0.1)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [False]


def test_no_timeout_means_unbounded() -> None:
    with deadline(None, "forever") as d:
        _spin(0.05)
    assert not d.armed


def test_an_interrupt_lost_where_python_cannot_raise_it_is_raised_again() -> None:
    """A signal handled inside a weakref callback or `__del__` is reported as ignored, not raised: the block must
    still end (the timer fires again until it does)."""
    lost: list[BaseException] = []
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded), deadline(0.1, "a parse"):
        try:
            _spin(5)
        except BaseException as exc:  # what the garbage collector's callback does with it
            lost.append(exc)
        _spin(5)
    assert len(lost) == 1 and time.monotonic() - started < 2
