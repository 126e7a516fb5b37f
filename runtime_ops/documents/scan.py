"""One landing scan: walk the source in key order from a cursor, keep what the ledger has not seen.

Pure of Dagster: the sensor wraps it. Cost per tick is bounded by `max_keys` listed and `max_new` kept; memory
holds one page plus the new objects of this batch, never the whole listing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from runtime_ops.resources.landing import LandingSource, ObjectRef


@dataclass
class ScanResult:
    new: list[ObjectRef] = field(default_factory=list)
    next_start_after: str | None = None  # None: the next scan starts again from the first key
    listed: int = 0
    wrapped: bool = False


def scan(
    source: LandingSource,
    known: Callable[[Sequence[str]], set[tuple[str, str]]],
    *,
    start_after: str | None,
    max_new: int,
    max_keys: int,
    page_size: int = 1000,
) -> ScanResult:
    """Collect up to `max_new` objects whose (key, version) is not known, listing at most `max_keys` keys.

    Comparing against the ledger instead of a timestamp is what makes two objects written in the same second,
    and an object overwritten in place, impossible to miss.
    """
    result = ScanResult(next_start_after=start_after)
    pages: Iterable[list[ObjectRef]] = source.iter_pages(start_after=start_after, page_size=page_size)
    for page in pages:
        if not page:
            continue
        seen = known([o.key for o in page])
        for obj in page:
            result.listed += 1
            result.next_start_after = obj.key
            if (obj.key, obj.version) not in seen:
                result.new.append(obj)
                if len(result.new) >= max_new:
                    return result
            if result.listed >= max_keys:
                return result
    # Reached the end of the listing: start from the top next time so overwrites of early keys are seen.
    result.next_start_after = None
    result.wrapped = True
    return result
