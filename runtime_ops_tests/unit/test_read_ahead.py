"""read_ahead: the landing scan's one-page look-ahead keeps order, errors and bounded memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from runtime_ops.documents.scan import read_ahead


def test_yields_every_item_in_order() -> None:
    assert list(read_ahead(iter(range(1000)))) == list(range(1000))
    assert list(read_ahead(iter([]))) == []


def test_producer_error_is_raised_in_the_consumer_after_the_items_before_it() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise ConnectionError("listing failed")

    got: list[int] = []
    with pytest.raises(ConnectionError, match="listing failed"):
        for x in read_ahead(items()):
            got.append(x)
    assert got == [1, 2]


def test_fetches_the_next_item_while_the_consumer_works_but_no_further() -> None:
    fetched: list[int] = []
    second_fetched = threading.Event()

    def items() -> Iterator[int]:
        for i in range(100):
            fetched.append(i)
            if i == 1:
                second_fetched.set()
            yield i

    gen = read_ahead(items(), depth=1)
    assert next(gen) == 0
    # While the consumer holds item 0, the producer fetches item 1 (the overlap) ...
    assert second_fetched.wait(5)
    time.sleep(0.1)
    # ... and at most one more that waits for a free slot: memory stays bounded by the depth.
    assert len(fetched) <= 3
    gen.close()


def test_closing_early_stops_the_producer_thread() -> None:
    fetched: list[int] = []

    def items() -> Iterator[int]:
        for i in range(10_000):
            fetched.append(i)
            yield i

    before = threading.active_count()
    gen = read_ahead(items())
    for x in gen:
        if x == 5:
            break
    gen.close()
    assert threading.active_count() == before
    assert len(fetched) <= 9
