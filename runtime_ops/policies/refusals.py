"""Unauthenticated failures: rate-limited per client and aggregated in the audit log (pure, no I/O).

A forged Slack signature, a wrong token or an unknown API key costs the server one cheap check; writing a
permanent audit record for each would let anyone grow the log at the rate they can send requests. So:

- **aggregated**: per (channel, outcome), the first refusal of a window is recorded on its own (with its
  detail: what one attempt looked like); the rest of the window are counted and recorded as one summary
  (how many, from which clients, first and last time) when the window closes;
- **rate-limited**: each client has a bucket of `burst` failures refilled at `per_second`; a client that
  emptied it gets 429 with a Retry-After until it refills. Only failures spend the bucket and the credential
  is always checked first, so a valid caller is never limited, even one behind the same proxy as an attacker.
  A client is the socket's peer, or what a trusted proxy says it is (FORWARDED_ALLOW_IPS); the buckets live in
  this process (`TokenBuckets`) or, with REDIS_URL, in Redis, shared by every replica of the ops API.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

MAX_CLIENTS = 10_000  # buckets kept; the fullest are dropped first (a full bucket is a fresh client)
MAX_NAMED_CLIENTS = 10  # clients (and reasons) a summary names, commonest first


@dataclass(frozen=True)
class Summary:
    """The refusals of one window after its first: written as one audit record."""

    channel: str
    outcome: str
    count: int
    first_at: datetime
    last_at: datetime
    clients: tuple[tuple[str, int], ...]  # (client, refusals), busiest first
    reasons: tuple[tuple[str, int], ...]  # (reason, refusals), commonest first
    limited: int  # how many of them were answered 429


@dataclass(frozen=True)
class Verdict:
    record: bool  # write this refusal's own audit record (the first of its window)
    retry_after: int | None  # seconds: the client is over its limit, answer 429
    summaries: tuple[Summary, ...]  # windows that closed: write one record each


@dataclass
class _Window:
    opened: datetime
    last: datetime
    count: int = 0  # after the first
    limited: int = 0
    clients: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass
class _Bucket:
    tokens: float
    at: datetime


class TokenBuckets:
    """A bucket of `burst` failures per client, refilled at `per_second`, kept in this process (not thread-safe:
    the caller locks). The ops API keeps them in Redis instead when REDIS_URL is set, shared by its replicas."""

    def __init__(self, burst: int, per_second: float) -> None:
        self.burst, self.per_second = burst, per_second
        self._buckets: dict[str, _Bucket] = {}

    def spend(self, client: str, now: datetime) -> int | None:
        """Take one failure from `client`'s bucket: None when it had one, else the seconds until it will."""
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) >= MAX_CLIENTS:
                self._forget_fullest(now)
            bucket = self._buckets[client] = _Bucket(float(self.burst), now)
        elapsed = max(0.0, (now - bucket.at).total_seconds())
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.per_second)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - bucket.tokens) / self.per_second))

    def _forget_fullest(self, now: datetime) -> None:
        def level(item: tuple[str, _Bucket]) -> float:
            return item[1].tokens + max(0.0, (now - item[1].at).total_seconds()) * self.per_second

        for client, _ in sorted(self._buckets.items(), key=level, reverse=True)[: MAX_CLIENTS // 10]:
            del self._buckets[client]


class RefusalPolicy:
    def __init__(self, *, window_s: float = 60.0, burst: int = 20, per_second: float = 1.0) -> None:
        if window_s <= 0 or burst < 1 or per_second <= 0:
            raise ValueError("window_s and per_second must be > 0 and burst >= 1")
        self.window_s, self.burst, self.per_second = window_s, burst, per_second
        self._windows: dict[tuple[str, str], _Window] = {}
        self.buckets = TokenBuckets(burst, per_second)

    def refused(
        self, channel: str, outcome: str, client: str | None, now: datetime, reason: str | None = None
    ) -> Verdict:
        """One unauthenticated failure on `channel` from `client` at `now` (`reason`: what was wrong), spending
        the client's bucket of this process."""
        return self.counted(channel, outcome, client, now, reason, self.buckets.spend(client or "-", now))

    def counted(
        self,
        channel: str,
        outcome: str,
        client: str | None,
        now: datetime,
        reason: str | None,
        retry_after: int | None,
    ) -> Verdict:
        """Like `refused`, with the client's bucket already spent elsewhere (`retry_after`: its answer)."""
        summaries = self.close(now)
        key = (channel, outcome)
        window = self._windows.get(key)
        if window is None:
            self._windows[key] = _Window(opened=now, last=now, limited=0)
            return Verdict(record=True, retry_after=retry_after, summaries=summaries)
        window.count += 1
        window.last = now
        window.limited += retry_after is not None
        window.clients[client or "-"] += 1
        window.reasons[(reason or "-")[:200]] += 1
        return Verdict(record=False, retry_after=retry_after, summaries=summaries)

    def close(self, now: datetime | None = None) -> tuple[Summary, ...]:
        """Summaries of the windows that ended by `now` (None: every window, e.g. at shutdown)."""
        out: list[Summary] = []
        for key, window in list(self._windows.items()):
            if now is not None and (now - window.opened).total_seconds() < self.window_s:
                continue
            del self._windows[key]
            if window.count:
                clients = tuple(window.clients.most_common(MAX_NAMED_CLIENTS))
                reasons = tuple(window.reasons.most_common(MAX_NAMED_CLIENTS))
                summary = Summary(*key, window.count, window.opened, window.last, clients, reasons, window.limited)
                out.append(summary)
        return tuple(out)
