"""Seeding the fenced aliases (`production`, `retrieval_index`) in tests and benchmarks the way their writers
write them: under the pipeline's promotion lock (a lease on the state store), carrying the lease's fencing token.
The registry refuses these aliases without one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from runtime_ops.locks.base import Lease
from runtime_ops.locks.promotion import promotion_lease
from runtime_ops.locks.store_lock import StoreLocker


@contextlib.contextmanager
def promotion_lock(store: Any) -> Iterator[Lease]:
    """The promotion lease of `store`'s pipeline, on the state store's own locks."""
    with promotion_lease(StoreLocker(store, wait_metrics=False), store.pipeline) as lease:
        yield lease


def set_fenced(store: Any, name: str, target: int, *, actor: str = "test") -> int:
    """Point `name` at `target` under the promotion lock; returns the fence it was written with."""
    with promotion_lock(store) as lease:
        store.registry.set_alias(name, target, actor=actor, fence=lease.fence)
    return lease.fence


def remove_fenced(store: Any, name: str, *, actor: str = "test") -> int | None:
    """Remove `name` under the promotion lock; returns the target it had."""
    with promotion_lock(store) as lease:
        return store.registry.remove_alias(name, actor=actor, fence=lease.fence)
