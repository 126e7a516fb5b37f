"""One landing scan: walk the source in key order from a cursor, keep what the ledger has not seen.

Pure of Dagster: the sensor wraps it. Cost per tick is bounded by `max_keys` listed and `max_new` kept; memory
holds one page plus the new objects of this batch, never the whole listing.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from runtime_ops.landing import LandingSource, ObjectRef

T = TypeVar("T")
_DONE = object()


def read_ahead(items: Iterable[T], depth: int = 1) -> Generator[T, None, None]:
    """Yield `items` while a background thread already fetches the next `depth` of them.

    A listing page is a network round trip and the ledger lookup of the previous page is another: overlapping
    them is what keeps a full listing tick as fast as a plain listing. Memory stays bounded (`depth` + 1 items
    held); exceptions of the producer are re-raised in the consumer; closing the generator early (a full batch)
    stops the producer after the item it is fetching.
    """
    slots: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                slots.put(item)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            slots.put(exc)
        else:
            slots.put(_DONE)

    worker = threading.Thread(target=produce, name="landing-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = slots.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue, then let it finish
            with contextlib.suppress(queue.Empty):
                slots.get(timeout=0.05)
        worker.join()


@dataclass
class ScanResult:
    new: list[ObjectRef] = field(default_factory=list)
    next_start_after: str | None = None  # None: the next scan starts again from the first key
    listed: int = 0
    wrapped: bool = False
    gone: list[str] = field(default_factory=list)  # current documents whose key the listing no longer has


# The current documents' keys in a key range (after, upto]: None bounds are open. Byte order, as S3 lists.
CurrentKeys = Callable[[str | None, str | None], list[str]]


def scan(
    source: LandingSource,
    known: Callable[[Sequence[str]], set[tuple[str, str]]],
    *,
    start_after: str | None,
    max_new: int,
    max_keys: int,
    page_size: int = 1000,
    current: CurrentKeys | None = None,
) -> ScanResult:
    """Collect up to `max_new` objects whose (key, version) is not known, listing at most `max_keys` keys.

    Comparing against the ledger instead of a timestamp is what makes two objects written in the same second,
    and an object overwritten in place, impossible to miss.

    With `current`, the scan is also a sweep for deletions: every key range it listed completely, from
    `start_after` to where it stopped (to the end of the listing when it wrapped), is compared with the current
    documents' keys in that range; those the listing did not have are `gone`. A range is judged only once listed
    whole, so a scan cut short by a full batch never calls unlisted keys gone.
    """
    result = ScanResult(next_start_after=start_after)
    pages = read_ahead(source.iter_pages(start_after=start_after, page_size=page_size))
    with contextlib.closing(pages):  # an early return (full batch) stops the read-ahead thread at once
        _scan_pages(pages, known, result, max_new=max_new, max_keys=max_keys, current=current, start_after=start_after)
    return result


def _scan_pages(
    pages: Iterable[list[ObjectRef]],
    known: Callable[[Sequence[str]], set[tuple[str, str]]],
    result: ScanResult,
    *,
    max_new: int,
    max_keys: int,
    current: CurrentKeys | None,
    start_after: str | None,
) -> None:
    covered = start_after  # keys up to here (exclusive of the next) have been compared for deletions

    def sweep(upto: str | None, listed: set[str]) -> None:
        nonlocal covered
        if current is not None:
            result.gone += [k for k in current(covered, upto) if k not in listed]
        covered = upto

    for page in pages:
        if not page:
            continue
        seen = known([o.key for o in page])
        listed: set[str] = set()
        for obj in page:
            result.listed += 1
            result.next_start_after = obj.key
            listed.add(obj.key)
            stop = result.listed >= max_keys
            if (obj.key, obj.version) not in seen:
                result.new.append(obj)
                stop = stop or len(result.new) >= max_new
            if stop:
                sweep(obj.key, listed)
                return
        sweep(page[-1].key, listed)
    # Reached the end of the listing: start from the top next time so overwrites of early keys are seen.
    sweep(None, set())
    result.next_start_after = None
    result.wrapped = True
