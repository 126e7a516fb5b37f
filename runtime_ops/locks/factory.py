"""Pick the lock backend from settings: Redis when REDIS_URL is set, else the state store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime_ops.locks.base import LockerBase
from runtime_ops.locks.redis_lock import RedisLocker
from runtime_ops.locks.store_lock import StoreLocker
from runtime_ops.observability.metric_writes import LockWaitRecorder
from runtime_ops.store import open_store

if TYPE_CHECKING:
    from runtime_ops.settings import Settings


def open_locker(settings: Settings) -> LockerBase:
    """A RedisLocker on `settings.redis_url` when set, else a StoreLocker on the state store.

    Nothing is contacted here: an unreachable Redis surfaces as LockUnavailable on the first acquire, never as a
    silent fallback to the state store (two processes on different backends would not exclude each other).
    """
    return locker_for(settings.redis_url, settings.resolved_database_url, settings)


def locker_for(redis_url: str | None, database_url: str, settings: Settings) -> LockerBase:
    """The locker on `redis_url` (None: on the state store at `database_url`, opened under `settings`)."""
    if redis_url:
        # Lock waits are metrics of the state store whichever backend holds the locks; the store is opened on
        # the first observation, so taking a Redis lock does not wait for it.
        return RedisLocker(
            redis_url, wait_observer=LockWaitRecorder(open_metrics=lambda: open_store(database_url, settings).metrics)
        )

    return StoreLocker(open_store(database_url, settings))
