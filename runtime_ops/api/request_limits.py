"""How fast each API key and each session may search and send feedback: token buckets, 429 with Retry-After past them.

Live traffic decides promotions, so no one client may send as much of it as it likes: a key that searched 767 times
in 10 s and clicked what it chose weighed more than every real user together. Each request spends one token from
its key's bucket and, when it names a `session`, one from that session's (`burst` tokens, refilled at the rate):

| bucket | rate (default) | setting |
|---|---|---|
| searches (`/api/search` + `/api/answer`) per key | 50/s | RUNTIME_OPS_KEY_SEARCHES_PER_S |
| searches per session | 1/s | RUNTIME_OPS_SESSION_SEARCHES_PER_S |
| feedback per key | 50/s | RUNTIME_OPS_KEY_FEEDBACK_PER_S |
| feedback per session | 2/s | RUNTIME_OPS_SESSION_FEEDBACK_PER_S |

A bucket holds two seconds' worth of tokens, at least 10 (bursts: a page of results clicked at once); a rate of 0
turns that limit off. Sessions are keyed by their keyed hash (`online.hashing`), never by what the caller sent.
With REDIS_URL the buckets live in Redis (`redis_buckets.py`, one round trip for both), shared by every replica of
the API; while Redis does not answer, each process limits with its own buckets (one warning when that starts).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from fastapi import HTTPException

from runtime_ops.api.redis_buckets import BucketsUnavailable, RedisBuckets
from runtime_ops.api.refusals import Refusals
from runtime_ops.policies.refusals import TokenBuckets
from runtime_ops.settings import Settings

log = logging.getLogger("runtime_ops.api.request_limits")

Kind = Literal["search", "feedback"]
KEY_PREFIX = "runtime_ops:limits:"
MIN_BURST = 10
BURST_SECONDS = 2.0
SHARED_RETRY_S = 5.0  # while Redis does not answer, how often a request tries it again


@dataclass(frozen=True)
class Limit:
    per_second: float

    @property
    def burst(self) -> int:
        return max(MIN_BURST, round(self.per_second * BURST_SECONDS))


@dataclass(frozen=True)
class Limited:
    """A refused request: which bucket ran dry and the whole seconds until it holds a token again."""

    retry_after: int
    bucket: str  # "key" or "session"

    def message(self, kind: Kind) -> str:
        what = "SEARCHES" if kind == "search" else "FEEDBACK"
        return (
            f"too many {what.lower()} from this {self.bucket}; retry in {self.retry_after} s (the limit is "
            f"RUNTIME_OPS_{self.bucket.upper()}_{what}_PER_S per second)"
        )


class RequestLimits:
    """The buckets of one API process (`shared`: in Redis, for every replica)."""

    def __init__(
        self,
        settings: Settings,
        now: Callable[[], datetime],
        refusals: Refusals | None = None,
        shared: RedisBuckets | None = None,
    ) -> None:
        self.now, self.refusals, self.shared = now, refusals, shared
        self.limits: dict[tuple[Kind, str], Limit] = {
            ("search", "key"): Limit(settings.key_searches_per_s),
            ("search", "session"): Limit(settings.session_searches_per_s),
            ("feedback", "key"): Limit(settings.key_feedback_per_s),
            ("feedback", "session"): Limit(settings.session_feedback_per_s),
        }
        self._local = {
            which: TokenBuckets(limit.burst, limit.per_second)
            for which, limit in self.limits.items()
            if limit.per_second > 0
        }
        self._lock = threading.Lock()
        self._shared_down = False
        self._retry_shared_at = 0.0

    def spend(self, kind: Kind, key_id: str, session_hash: str | None) -> Limited | None:
        """Spend one token of `kind` from the key's bucket and the session's (blocking when shared: call it in the
        thread pool); the refusal when either was empty."""
        wanted = [("key", key_id), ("session", session_hash)]
        buckets = [(bucket, name) for bucket, name in wanted if name is not None and (kind, bucket) in self._local]
        if not buckets:
            return None
        now = self.now()
        if self.shared is not None and time.monotonic() >= self._retry_shared_at:
            try:
                return self._spend_shared(kind, buckets, now)
            except BucketsUnavailable as exc:
                if not self._shared_down:
                    log.warning("request limits: %s; limiting per process until it answers", exc)
                self._shared_down = True
                # Not on every request: each try waits for the socket timeout, which the request would pay.
                self._retry_shared_at = time.monotonic() + SHARED_RETRY_S
        refused: Limited | None = None
        with self._lock:
            for bucket, name in buckets:
                wait = self._local[(kind, bucket)].spend(name, now)
                if wait is not None and (refused is None or wait > refused.retry_after):
                    refused = Limited(wait, bucket)
        return refused

    def _spend_shared(self, kind: Kind, buckets: list[tuple[str, str]], now: datetime) -> Limited | None:
        assert self.shared is not None
        specs = [
            (f"{KEY_PREFIX}{kind}:{bucket}:{name}", self.limits[(kind, bucket)].burst,
             self.limits[(kind, bucket)].per_second)
            for bucket, name in buckets
        ]  # fmt: skip
        refused = self.shared.spend_all(specs, now)
        if self._shared_down:
            log.info("request limits: Redis answers again; limiting across replicas")
            self._shared_down = False
        return None if refused is None else Limited(refused[0], buckets[refused[1]][0])

    def check(self, kind: Kind, key_id: str, session_hash: str | None, *, client: str | None, path: str) -> None:
        """Spend a token of `kind`, or raise the 429 (with Retry-After) that says which limit the caller is over;
        a refusal is logged and recorded as the API records refusals (`api/refusals.py`: audited in aggregate)."""
        limited = self.spend(kind, key_id, session_hash)
        if limited is None:
            return
        message = limited.message(kind)
        extra = {"http_status": 429, "api_key": key_id, "path": path, "client": client}
        log.info("request limited: %s", message, extra=extra)
        if self.refusals is not None:
            detail = {"reason": message, "path": path, "api_key": key_id, "http_status": 429}
            self.refusals.refused(channel="api", outcome="rate_limited", client=client, detail=detail)
        raise HTTPException(429, message, headers={"Retry-After": str(limited.retry_after)})
