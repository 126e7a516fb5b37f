"""The lock interface: leases with fencing tokens, a bounded wait, renewal while held. Pure: no I/O here.

A lease is only a hint that nobody else is working: a holder can pause (GC, SIGSTOP, a slow disk) past its TTL
while another process takes the lock. Every protected write therefore carries `Lease.fence`, and the store
refuses a fence lower than the last one it accepted (`StateStore.registry.set_alias(..., fence=...)`). Nothing here
replaces that check: `Lease.lease_lost` and `LockLost` only report what the renewal saw.

Backends implement `_try_acquire`, `release` and `extend`; `LockerBase` gives them the bounded wait
(`acquire`) and `hold`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from runtime_ops.backoff import capped_exponential

log = logging.getLogger(__name__)

DEFAULT_TTL_MS = 30_000
DEFAULT_WAIT_S = 10.0
# A waiter sleeps for the holder's remaining TTL, but never longer than this backoff (it grows from the
# first value to the second), so a lock released early is picked up within a quarter of a second.
MIN_POLL_S = 0.005
MAX_POLL_S = 0.25

_HOST = socket.gethostname()[:64]


def new_token() -> str:
    """A random lease token (128 bits) that also says who holds the lock: `<hex>@<host>:<pid>`."""
    return f"{secrets.token_hex(16)}@{_HOST}:{os.getpid()}"


def holder_of(token: str | None) -> str | None:
    """The `host:pid` part of a token, for messages (None when unknown)."""
    if not token:
        return None
    return token.partition("@")[2] or None


class LockError(RuntimeError):
    """Base of the lock errors."""


class LockTimeout(LockError):
    """The lock could not be acquired within the bounded wait."""

    def __init__(self, name: str, wait_s: float, holder: str | None = None, remaining_ms: int | None = None):
        self.name, self.wait_s, self.holder, self.remaining_ms = name, wait_s, holder, remaining_ms
        who = f"held by {holder}" if holder else "held by another holder"
        left = f", {remaining_ms} ms left on its lease" if remaining_ms is not None and remaining_ms >= 0 else ""
        super().__init__(f"could not acquire lock {name!r} within {wait_s:g}s: {who}{left}")


class LockLost(LockError):
    """The lease ended while it was held: renewal was refused, or it expired before it was released."""


class LockUnavailable(LockError):
    """The lock backend cannot be reached: protected work must not start (fail closed)."""


@dataclass
class Lease:
    """A held lock. `fence` increases with every acquisition of `name`: protected writes carry it.

    `acquired_at` is `time.monotonic()` taken *before* the acquire request was sent, so
    `acquired_at + ttl_ms` is a conservative local estimate of when the backend expires the lease.
    `extend` moves `renewed_at` the same way; `lost` is set (with the reason) when `hold`'s renewal fails.
    """

    name: str
    token: str
    fence: int
    ttl_ms: int
    acquired_at: float
    renewed_at: float | None = None
    lost: str | None = None

    @property
    def lease_lost(self) -> bool:
        return self.lost is not None

    @property
    def holder(self) -> str | None:
        return holder_of(self.token)

    def remaining_s(self, now: float | None = None) -> float:
        """How long the lease is certainly still valid on the backend (<= 0: it may have expired)."""
        start = self.renewed_at if self.renewed_at is not None else self.acquired_at
        return start + self.ttl_ms / 1000.0 - (time.monotonic() if now is None else now)

    def check(self) -> None:
        """Raise LockLost when renewal failed or the lease may have expired. A cheap early exit before a
        protected write; the write itself must still carry `fence`."""
        if self.lost is not None:
            raise LockLost(f"lock {self.name!r} (fence {self.fence}) was lost: {self.lost}")
        if self.remaining_s() <= 0:
            raise LockLost(f"lock {self.name!r} (fence {self.fence}) may have expired: its {self.ttl_ms} ms TTL passed")


@dataclass(frozen=True)
class Held:
    """A failed acquisition attempt: who holds the lock and for how much longer (None when unknown)."""

    holder_token: str | None
    remaining_ms: int | None


@runtime_checkable
class Locker(Protocol):
    def acquire(self, name: str, *, ttl_ms: int = DEFAULT_TTL_MS, wait_s: float = DEFAULT_WAIT_S) -> Lease: ...

    def release(self, lease: Lease) -> bool: ...

    def extend(self, lease: Lease, ttl_ms: int | None = None) -> bool: ...

    def hold(
        self, name: str, *, ttl_ms: int = DEFAULT_TTL_MS, wait_s: float = DEFAULT_WAIT_S, renew: bool = True
    ) -> contextlib.AbstractContextManager[Lease]: ...

    def close(self) -> None: ...


def poll_delay(held: Held, attempt: int, rng: random.Random | None = None) -> float:
    """How long a waiter sleeps after failed attempt number `attempt` (0-based).

    The holder's remaining TTL bounds it from above (no point polling a lease that cannot have expired, and no
    point sleeping past its expiry), a backoff growing from MIN_POLL_S to MAX_POLL_S bounds it too (the holder
    may release early), and jitter (50-100 %) keeps waiters from retrying in lockstep.
    """
    backoff = capped_exponential(attempt + 1, MIN_POLL_S, 2, MAX_POLL_S)
    delay = backoff
    if held.remaining_ms is not None and held.remaining_ms >= 0:
        delay = min(backoff, max(held.remaining_ms, 1) / 1000.0)
    return delay * (rng or random).uniform(0.5, 1.0) if delay > 0.002 else delay


# `observer(lock name, outcome, seconds waited)`: outcome is acquired | timeout | unavailable.
WaitObserver = Callable[[str, str, float], None]


class LockerBase:
    """Bounded wait and `hold` on top of a backend's `_try_acquire`, `release` and `extend`.

    `wait_observer`, when set, is told how long every `acquire` waited and how it ended (the lock-wait metric);
    an observer that raises is logged and ignored, never the caller's problem.
    """

    wait_observer: WaitObserver | None = None

    @staticmethod
    def _extension_ttl(lease: Lease, ttl_ms: int | None) -> int:
        """The TTL an `extend` sets: the lease's own unless given; never zero or negative."""
        ttl = lease.ttl_ms if ttl_ms is None else ttl_ms
        if ttl <= 0:
            raise ValueError("ttl_ms must be positive")
        return ttl

    def _try_acquire(self, name: str, token: str, ttl_ms: int) -> int | Held:  # pragma: no cover - abstract
        """One attempt: the fence when the lock was taken, else who holds it."""
        raise NotImplementedError

    def release(self, lease: Lease) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def extend(self, lease: Lease, ttl_ms: int | None = None) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass

    def acquire(self, name: str, *, ttl_ms: int = DEFAULT_TTL_MS, wait_s: float = DEFAULT_WAIT_S) -> Lease:
        """Take `name` for `ttl_ms`, waiting at most `wait_s` (0: one attempt). Raises LockTimeout when it stays
        held, LockUnavailable when the backend cannot be reached."""
        if ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive: a lock without expiry outlives a crashed holder")
        if wait_s < 0:
            raise ValueError("wait_s must be >= 0")
        token = new_token()
        started = time.monotonic()
        deadline = started + wait_s
        attempt = 0
        try:
            while True:
                sent = time.monotonic()
                result = self._try_acquire(name, token, ttl_ms)
                if not isinstance(result, Held):
                    lease = Lease(name, token, int(result), ttl_ms, sent)
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LockTimeout(name, wait_s, holder_of(result.holder_token), result.remaining_ms)
                # Never sleep past the deadline, and make one last attempt at it.
                time.sleep(min(poll_delay(result, attempt), left))
                attempt += 1
        except LockTimeout:
            self._observe_wait(name, "timeout", time.monotonic() - started)
            raise
        except LockUnavailable:
            self._observe_wait(name, "unavailable", time.monotonic() - started)
            raise
        # Measured up to the moment the lock was granted, before the observation's own write.
        self._observe_wait(name, "acquired", time.monotonic() - started)
        return lease

    def _observe_wait(self, name: str, outcome: str, seconds: float) -> None:
        observer = self.wait_observer
        if observer is None:
            return
        try:
            observer(name, outcome, seconds)
        except Exception as exc:  # a metric must never decide whether a lock is taken
            log.warning("lock wait of %r not observed: %s", name, exc)

    @contextlib.contextmanager
    def hold(
        self, name: str, *, ttl_ms: int = DEFAULT_TTL_MS, wait_s: float = DEFAULT_WAIT_S, renew: bool = True
    ) -> Iterator[Lease]:
        """Hold `name` for the duration of the block, yielding the Lease (carry `lease.fence` on every write).

        With `renew`, a daemon thread extends the lease every ttl/3. When renewal is refused (the lease expired
        and may belong to someone else now) or keeps failing until the lease must have expired, `lease.lost`
        says why and leaving the block raises LockLost (unless the block already raised). The lock is released
        on exit; a release refused because the lease had already ended raises LockLost too. A backend that is
        unreachable at release is only logged: the lease expires by itself.
        """
        lease = self.acquire(name, ttl_ms=ttl_ms, wait_s=wait_s)
        renewer = _Renewer(self, lease) if renew else None
        if renewer is not None:
            renewer.start()
        body_ok = False
        try:
            yield lease
            body_ok = True
        finally:
            if renewer is not None:
                renewer.stop()
            released: bool | None
            try:
                released = self.release(lease)
            except LockUnavailable as exc:
                log.warning("could not release lock %r (fence %d); it expires by its TTL: %s", name, lease.fence, exc)
                released = None
            if released is False and lease.lost is None:
                lease.lost = "the lease had already expired when it was released"
            if body_ok and lease.lost is not None:
                raise LockLost(f"lock {name!r} (fence {lease.fence}) was lost while held: {lease.lost}")


class _Renewer:
    """Extends a lease every ttl/3 until stopped; records in `lease.lost` why it could not."""

    def __init__(self, locker: LockerBase, lease: Lease) -> None:
        self.locker, self.lease = locker, lease
        self.interval = max(lease.ttl_ms / 3000.0, 0.001)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lock-renew:{lease.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        lease, delay = self.lease, self.interval
        while not self._stop.wait(delay):
            try:
                ok = self.locker.extend(lease, lease.ttl_ms)
            except Exception as exc:  # LockUnavailable, or anything else: retry while the lease may still live
                left = lease.remaining_s()
                if left <= 0:
                    lease.lost = f"renewal failed until the lease expired: {exc}"
                    log.error("lock %r (fence %d) lost: %s", lease.name, lease.fence, lease.lost)
                    return
                log.warning("renewing lock %r failed (%s); retrying, %.0f ms left", lease.name, exc, left * 1000)
                delay = min(self.interval, max(left / 3, 0.005))
                continue
            if not ok:
                lease.lost = "renewal was refused: the lease had expired (another holder may have it)"
                log.error("lock %r (fence %d) lost: %s", lease.name, lease.fence, lease.lost)
                return
            delay = self.interval
