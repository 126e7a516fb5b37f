"""The refusal limiter's buckets in Redis (REDIS_URL), shared by every replica of the ops API.

The same token bucket as `runtime_ops.policies.refusals.TokenBuckets` (`burst` failures per client, refilled at
`per_second`), read, refilled and spent in one Lua script, so two replicas counting the same client at once
cannot both take its last token. One hash per client, `runtime_ops:refusals:<client>` (tokens, last time in ms),
expiring once it would be full again: an idle client costs Redis nothing.

Times come from the caller's clock (the API's), as for the in-process buckets, so both behave the same.
"""

from __future__ import annotations

import math
import threading
from datetime import datetime
from typing import Any

from runtime_ops.locks.redis_lock import redact_url

KEY_PREFIX = "runtime_ops:refusals:"

# KEYS[1] the client's bucket; ARGV[1] burst, ARGV[2] tokens per second, ARGV[3] now (ms), ARGV[4] ttl (ms).
# Returns 0 when a token was taken, else the whole seconds until one is back.
SPEND_LUA = """
local burst, rate, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('hmget', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(state[1]), tonumber(state[2])
if tokens == nil or at == nil then
  tokens, at = burst, now
end
if now > at then
  tokens = math.min(burst, tokens + (now - at) / 1000 * rate)
  at = now
end
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) / rate))
end
redis.call('hset', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at))
redis.call('pexpire', KEYS[1], ARGV[4])
return wait
"""


class BucketsUnavailable(RuntimeError):
    """Redis did not answer; the message names it (without a password)."""


class RedisBuckets:
    """Per-client buckets in the Redis at `url`. Thread-safe; the client is created on first use."""

    def __init__(self, url: str, *, burst: int, per_second: float, socket_timeout: float = 0.5) -> None:
        self.url, self.burst, self.per_second = url, burst, per_second
        self.socket_timeout = socket_timeout
        # Until the bucket would be full again, plus a second: after that a missing key means the same thing.
        self.ttl_ms = math.ceil(burst / per_second + 1) * 1000
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
        script = self._spend_script()
        now_ms = int(now.timestamp() * 1000)
        try:
            wait = script(keys=[KEY_PREFIX + client], args=[self.burst, repr(self.per_second), now_ms, self.ttl_ms])
        except self._errors as exc:
            raise BucketsUnavailable(
                f"Redis at REDIS_URL={redact_url(self.url)} did not answer ({type(exc).__name__})"
            ) from exc
        return int(wait) or None

    def close(self) -> None:
        client, self._client, self._script = self._client, None, None
        if client is not None:
            client.close()
