"""Retry policy for outbound HTTP calls: capped exponential backoff with jitter, `Retry-After`, and the
classification of an attempt's outcome. Pure logic (no I/O, no sleeping); randomness and "now" are injected
so every number here is unit-testable. The capped exponential itself is `runtime_ops.backoff`'s.

Attempts are numbered from 1. After attempt `n` fails, the next one waits `Backoff.delay(n, rng)`:

    ceiling(n) = min(max_delay_s, base_s * factor ** (n - 1))
    full jitter   -> uniform in [0, ceiling(n)]
    equal jitter  -> uniform in [ceiling(n) / 2, ceiling(n)]
    no jitter     -> ceiling(n)

A `Retry-After` header (delta-seconds or HTTP-date) replaces the computed delay, capped at `max_delay_s`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal, Protocol

import httpx

from runtime_ops.backoff import capped_exponential

Jitter = Literal["full", "equal", "none"]
Verdict = Literal["retry", "fail", "ok"]


class RandomSource(Protocol):
    def random(self) -> float: ...


class InvalidResponse(ValueError):
    """A 2xx response whose body cannot be used. `transient=True` (a truncated or undecodable body) is
    retried; `transient=False` (well-formed JSON of the wrong shape) is not: asking again gets the same."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.5
    factor: float = 2.0
    max_delay_s: float = 20.0
    max_attempts: int = 5  # attempts in total, the first one included
    jitter: Jitter = "full"
    max_total_s: float = 60.0  # no retry is started whose wait would end past this budget

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base_s) and self.base_s >= 0):
            raise ValueError(f"Backoff.base_s must be a finite number >= 0, got {self.base_s!r}")
        if not (math.isfinite(self.factor) and self.factor >= 1):
            raise ValueError(f"Backoff.factor must be a finite number >= 1, got {self.factor!r}")
        if not (self.max_delay_s >= 0):
            raise ValueError(f"Backoff.max_delay_s must be >= 0, got {self.max_delay_s!r}")
        if not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise ValueError(f"Backoff.max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        if self.jitter not in ("full", "equal", "none"):
            raise ValueError(f"Backoff.jitter must be 'full', 'equal' or 'none', got {self.jitter!r}")
        if not (self.max_total_s > 0):
            raise ValueError(f"Backoff.max_total_s must be > 0, got {self.max_total_s!r}")

    def ceiling(self, attempt: int) -> float:
        """The largest delay after failed attempt `attempt` (1-based): min(max_delay_s, base * factor^(n-1))."""
        return capped_exponential(attempt, self.base_s, self.factor, self.max_delay_s)

    def bounds(self, attempt: int) -> tuple[float, float]:
        """(lowest, highest) delay `delay(attempt, rng)` can return under this policy's jitter."""
        cap = self.ceiling(attempt)
        if self.jitter == "full":
            return 0.0, cap
        if self.jitter == "equal":
            return cap / 2, cap
        return cap, cap

    def delay(self, attempt: int, rng: RandomSource) -> float:
        """The wait after failed attempt `attempt` (1-based), jittered with `rng.random()` in [0, 1)."""
        low, high = self.bounds(attempt)
        if low == high:
            return high
        return low + (high - low) * rng.random()

    def retry_after_delay(self, header_value: str | None, now: datetime | float | None = None) -> float | None:
        """The wait a `Retry-After` header asks for, capped at `max_delay_s`; None when absent or unparsable."""
        wanted = parse_retry_after(header_value, now)
        return None if wanted is None else min(wanted, self.max_delay_s)


def parse_retry_after(header_value: str | None, now: datetime | float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` value: delta-seconds (`"120"`) or an HTTP-date (IMF-fixdate,
    RFC 850 or asctime, taken as UTC). A date in the past means 0. `now` is an aware datetime or a POSIX
    timestamp (default: the current time). None when absent, negative or unparsable."""
    if header_value is None:
        return None
    value = header_value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:  # pragma: no cover - older Pythons returned None instead of raising
        return None
    if when.tzinfo is None:  # asctime carries no zone; HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    if now is None:
        now_dt = datetime.now(UTC)
    elif isinstance(now, datetime):
        now_dt = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    else:
        now_dt = datetime.fromtimestamp(now, UTC)
    return max(0.0, (when - now_dt).total_seconds())


# Transport failures where the request may simply succeed next time. Local mistakes (an unsupported URL
# scheme, a malformed request, a proxy refusing us) are not among them.
_TRANSIENT_EXCEPTIONS: tuple[type[BaseException], ...] = (
    httpx.TimeoutException,  # connect / read / write / pool timeouts
    httpx.NetworkError,  # connect, read, write, close errors (refused, reset, ...)
    httpx.RemoteProtocolError,  # disconnected without a response, body cut short
    httpx.DecodingError,  # a content-encoded body that does not decode (cut off)
    ConnectionError,  # refused / reset / aborted / broken pipe (OSError family)
    TimeoutError,
    json.JSONDecodeError,  # a truncated or garbled JSON body on a 2xx
    UnicodeDecodeError,
)


def classify(status: int | None, exc: BaseException | None) -> Verdict:
    """What to do with an attempt that ended with HTTP `status` (None: no response) and/or `exc`.

    retry: 429, any 5xx, connection errors, timeouts, a truncated/invalid body on a 2xx;
    fail: any other 4xx (and 1xx/3xx, which an API client does not expect), any other exception;
    ok: a 2xx with no exception.
    """
    if status is not None and not 200 <= status < 300:
        if status == 429 or 500 <= status < 600:
            return "retry"
        return "fail"
    if exc is not None:
        if isinstance(exc, InvalidResponse):
            return "retry" if exc.transient else "fail"
        return "retry" if isinstance(exc, _TRANSIENT_EXCEPTIONS) else "fail"
    if status is None:
        raise ValueError("classify() needs a status, an exception, or both")
    return "ok"
