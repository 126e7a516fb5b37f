"""Locks on Redis: `SET NX PX` with a random token, Lua release/extend, fencing tokens from a per-lock `INCR`.

One round trip per operation: acquire is one EVALSHA (SET NX PX, then INCR of the lock's fence counter), release
and extend are one EVALSHA each (compare the token, then DEL / PEXPIRE).

Keys: `runtime_ops:lock:{name}` holds the token and expires with the lease; `runtime_ops:fence:{name}` is the
fence counter and never expires. A fence counter that does not exist yet (first use, or Redis lost its data in a
restart without persistence) starts at the Redis server's clock in microseconds instead of 1: the store keeps
the fences it accepted, so a counter restarting at 1 would have every later write refused. Counting up from the
clock stays above every token issued before, as long as fewer than a million acquisitions per second happened.

Any connection error or timeout becomes LockUnavailable: protected work fails closed.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from runtime_ops.locks.base import Held, Lease, LockerBase, LockUnavailable, WaitObserver
from runtime_ops.observability.redaction import redact_url

KEY_PREFIX = "runtime_ops:lock:"
FENCE_PREFIX = "runtime_ops:fence:"

# KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl in ms.
# Returns the fence (an integer) when the lock was taken, else {remaining ms of the holder's lease, its token}.
# Acquiring again with the token that already holds the lock returns the current fence: a retried EVALSHA
# whose first reply was lost does not wait for itself.
ACQUIRE_LUA = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.call('incr', KEYS[2])
  if fence == 1 then
    local t = redis.call('time')
    local seeded = t[1] .. string.format('%06d', tonumber(t[2]))
    redis.call('set', KEYS[2], seeded)
    fence = tonumber(seeded)
  end
  return fence
end
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return tonumber(redis.call('get', KEYS[2]))
end
return {redis.call('pttl', KEYS[1]), holder}
"""

# KEYS[1] lock key; ARGV[1] token. 1 when this token held the lock and it is now free, else 0.
RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""

# KEYS[1] lock key; ARGV[1] token, ARGV[2] new ttl in ms (from now). 1 when extended, else 0.
EXTEND_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""


class RedisLocker(LockerBase):
    """Locks on the Redis at `url` (REDIS_URL). The client is created on first use; thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float = 2.0,
        connect_timeout: float = 2.0,
        wait_observer: WaitObserver | None = None,
    ) -> None:
        self.url = url
        # Where lock waits are recorded (the state store's lock-wait histogram, see `locker_for`); None: nowhere.
        self.wait_observer = wait_observer
        self.socket_timeout = socket_timeout
        self.connect_timeout = connect_timeout
        self._client: Any = None
        self._scripts: tuple[Any, Any, Any] | None = None
        self._errors: tuple[type[BaseException], ...] = ()
        self._init_lock = threading.Lock()

    # ------------------------------------------------------------------ plumbing
    def _connect(self) -> tuple[Any, tuple[Any, Any, Any]]:
        if self._client is not None and self._scripts is not None:
            return self._client, self._scripts
        with self._init_lock:
            if self._client is not None and self._scripts is not None:
                return self._client, self._scripts
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry

            # One quick retry on a connection error only: it replaces a pooled connection the server closed
            # (a restart). A timeout is not retried: a hung server must fail within one socket_timeout.
            retry = Retry(ExponentialBackoff(cap=0.05, base=0.01), 1, supported_errors=(redis.ConnectionError,))
            client = redis.Redis.from_url(
                self.url,
                socket_timeout=self.socket_timeout,
                socket_connect_timeout=self.connect_timeout,
                retry=retry,
            )
            self._errors = (redis.ConnectionError, redis.TimeoutError, OSError)
            self._scripts = (
                client.register_script(ACQUIRE_LUA),
                client.register_script(RELEASE_LUA),
                client.register_script(EXTEND_LUA),
            )
            self._client = client
        return self._client, self._scripts

    def _unavailable(self, exc: BaseException) -> LockUnavailable:
        return LockUnavailable(
            f"lock backend unreachable: Redis at REDIS_URL={redact_url(self.url)} did not answer "
            f"({type(exc).__name__}: {exc}); protected work is refused until it is back"
        )

    @property
    def client(self) -> Any:
        """The redis-py client (created on first use)."""
        return self._connect()[0]

    def close(self) -> None:
        client, self._client, self._scripts = self._client, None, None
        if client is not None:
            client.close()

    # ------------------------------------------------------------------ operations
    def _try_acquire(self, name: str, token: str, ttl_ms: int) -> int | Held:
        try:
            _, (acquire, _, _) = self._connect()
            result = acquire(keys=[KEY_PREFIX + name, FENCE_PREFIX + name], args=[token, ttl_ms])
        except self._errors as exc:
            raise self._unavailable(exc) from exc
        if isinstance(result, int):
            return result
        pttl, holder = result
        return Held(holder.decode() if isinstance(holder, bytes) else holder, int(pttl))

    def release(self, lease: Lease) -> bool:
        """Free the lock when `lease` still holds it; False when it had expired or belongs to someone else."""
        try:
            _, (_, release, _) = self._connect()
            return bool(release(keys=[KEY_PREFIX + lease.name], args=[lease.token]))
        except self._errors as exc:
            raise self._unavailable(exc) from exc

    def extend(self, lease: Lease, ttl_ms: int | None = None) -> bool:
        """Reset the lease's TTL to `ttl_ms` (default: its own) from now; False when it is no longer held."""
        ttl = self._extension_ttl(lease, ttl_ms)
        sent = time.monotonic()
        try:
            _, (_, _, extend) = self._connect()
            ok = bool(extend(keys=[KEY_PREFIX + lease.name], args=[lease.token, ttl]))
        except self._errors as exc:
            raise self._unavailable(exc) from exc
        if ok:
            lease.ttl_ms, lease.renewed_at = ttl, sent
        return ok

    def fence_of(self, name: str) -> int | None:
        """The last fence issued for `name` (None before the first acquisition)."""
        try:
            value = self.client.get(FENCE_PREFIX + name)
        except self._errors as exc:
            raise self._unavailable(exc) from exc
        return None if value is None else int(value)
