"""Token buckets in Redis (REDIS_URL), shared by every replica of the ops API: the refusal limiter's (one bucket of
failures per client) and the request limits' (`runtime_ops.api.request_limits`: searches and feedback per key and
per session).

The same token bucket as `runtime_ops.policies.refusals.TokenBuckets` (`burst` tokens, refilled at `per_second`),
read, refilled and spent in one Lua script, so two replicas counting the same client at once cannot both take its
last token. A request that spends from several buckets (its key's and its session's) does so in the same script:
one round trip. One hash per bucket (tokens, last time in ms), expiring once it would be full again: an idle client
costs Redis nothing.

Times come from the caller's clock (the API's), as for the in-process buckets, so both behave the same.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from runtime_ops.locks.redis_lock import redact_url

KEY_PREFIX = "runtime_ops:refusals:"

# KEYS: the buckets; ARGV[1] now (ms), then per bucket: burst, tokens per second, ttl (ms). Every bucket spends one
# token when it has one. Returns {0, 0} when all of them had one, else {the whole seconds until the emptiest has
# one, its position in KEYS}.
SPEND_LUA = """
local now = tonumber(ARGV[1])
local longest, which = 0, 0
for i, key in ipairs(KEYS) do
  local burst, rate, ttl = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]), ARGV[3 * i + 1]
  local state = redis.call('hmget', key, 'tokens', 'at')
  local tokens, at = tonumber(state[1]), tonumber(state[2])
  if tokens == nil or at == nil then
    tokens, at = burst, now
  end
  if now > at then
    tokens = math.min(burst, tokens + (now - at) / 1000 * rate)
    at = now
  end
  if tokens >= 1 then
    tokens = tokens - 1
  else
    local wait = math.max(1, math.ceil((1 - tokens) / rate))
    if wait > longest then
      longest, which = wait, i
    end
  end
  redis.call('hset', key, 'tokens', tostring(tokens), 'at', tostring(at))
  redis.call('pexpire', key, ttl)
end
return {longest, which}
"""


def ttl_ms(burst: int, per_second: float) -> int:
    """How long a bucket's key lives: until it would be full again, plus a second (a missing key means full)."""
    return math.ceil(burst / per_second + 1) * 1000


class BucketsUnavailable(RuntimeError):
    """Redis did not answer; the message names it (without a password)."""


class RedisBuckets:
    """Buckets in the Redis at `url`: `spend` the refusal limiter's per-client ones (`burst`, `per_second`),
    `spend_all` any. Thread-safe; the client is created on first use."""

    def __init__(self, url: str, *, burst: int, per_second: float, socket_timeout: float = 0.5) -> None:
        self.url, self.burst, self.per_second = url, burst, per_second
        self.socket_timeout = socket_timeout
        self.ttl_ms = ttl_ms(burst, per_second)
        self._script: Any = None
        self._errors: tuple[type[BaseException], ...] = ()
        self._client: Any = None
        self._init_lock = threading.Lock()

    def _spend_script(self) -> Any:
        if self._script is not None:
            return self._script
        with self._init_lock:
            if self._script is None:
                import redis

                # No retries: a refusal must not wait on a hung Redis; the caller falls back to its own buckets.
                self._client = redis.Redis.from_url(
                    self.url, socket_timeout=self.socket_timeout, socket_connect_timeout=self.socket_timeout
                )
                self._errors = (redis.RedisError, OSError)
                self._script = self._client.register_script(SPEND_LUA)
        return self._script

    def spend(self, client: str, now: datetime) -> int | None:
        """Take one failure from `client`'s bucket: None when it had one, else the seconds until it will."""
        refused = self.spend_all([(KEY_PREFIX + client, self.burst, self.per_second)], now)
        return refused[0] if refused is not None else None

    def spend_all(self, buckets: Sequence[tuple[str, int, float]], now: datetime) -> tuple[int, int] | None:
        """Take one token from each of `buckets` ((Redis key, burst, per second)) in one round trip: None when every
        one had a token, else (the seconds until the emptiest will, its index in `buckets`)."""
        script = self._spend_script()
        args: list[Any] = [int(now.timestamp() * 1000)]
        for _, burst, per_second in buckets:
            args += [burst, repr(per_second), ttl_ms(burst, per_second)]
        try:
            wait, which = script(keys=[key for key, _, _ in buckets], args=args)
        except self._errors as exc:
            raise BucketsUnavailable(
                f"Redis at REDIS_URL={redact_url(self.url)} did not answer ({type(exc).__name__})"
            ) from exc
        return (int(wait), int(which) - 1) if int(wait) else None

    def close(self) -> None:
        client, self._client, self._script = self._client, None, None
        if client is not None:
            client.close()
