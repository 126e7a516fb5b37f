"""Distributed locks with fencing tokens: Redis (`REDIS_URL`) or the state store, behind one interface.

    locker = open_locker(get_settings())
    with locker.hold("promotion", ttl_ms=30_000, wait_s=10) as lease:
        store.registry.set_alias("production", version, actor=..., fence=lease.fence)

The backends are imported on first use (`RedisLocker`, `StoreLocker`, `open_locker`), so importing the interface
does not import redis-py or SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime_ops.locks.base import (
    Lease,
    Locker,
    LockerBase,
    LockError,
    LockLost,
    LockTimeout,
    LockUnavailable,
)

if TYPE_CHECKING:
    from runtime_ops.locks.factory import open_locker
    from runtime_ops.locks.redis_lock import RedisLocker
    from runtime_ops.locks.store_lock import StoreLocker

__all__ = [
    "Lease",
    "LockError",
    "LockLost",
    "LockTimeout",
    "LockUnavailable",
    "Locker",
    "LockerBase",
    "RedisLocker",
    "StoreLocker",
    "open_locker",
]

_LAZY = {
    "RedisLocker": "runtime_ops.locks.redis_lock",
    "StoreLocker": "runtime_ops.locks.store_lock",
    "open_locker": "runtime_ops.locks.factory",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime_ops.locks' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
