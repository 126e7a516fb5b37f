"""The promotion lock of a pipeline: what every write of its `production` and `retrieval_index` aliases holds
(promotion, rollback, re-embedding, the serving index), and the lease those writes carry as their fencing token.

`promotion_lease` takes the lock from a locker for a block, or, when the caller already holds it (a promotion
saga's step, a rollback), hands back the caller's lease after checking that it is this lock's and still live:
the lock is re-entrant by passing the held lease, never by acquiring it twice (which would wait for itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from runtime_ops.locks.base import Lease, Locker

# The lease is renewed every third of its TTL while held; a holder that dies frees the lock within the TTL,
# inside the next promotion's bounded wait.
LOCK_TTL_MS = 15_000
LOCK_WAIT_S = 30.0


def lock_name(pipeline: str) -> str:
    """The lock every change of a pipeline's production or serving index holds."""
    return f"{pipeline}:promotion"


@contextlib.contextmanager
def promotion_lease(lock: Locker | Lease, pipeline: str) -> Iterator[Lease]:
    """`pipeline`'s promotion lease for the block: acquired from `lock` (a locker; released afterwards), or
    `lock` itself when it is a lease the caller holds (it stays held)."""
    if isinstance(lock, Lease):
        if lock.name != lock_name(pipeline):
            raise ValueError(
                f"the lease of lock {lock.name!r} does not protect pipeline {pipeline!r}'s aliases: hold "
                f"{lock_name(pipeline)!r}"
            )
        lock.check()  # a lease that was lost or may have expired fails here, before any write
        yield lock
        return
    with lock.hold(lock_name(pipeline), ttl_ms=LOCK_TTL_MS, wait_s=LOCK_WAIT_S) as lease:
        yield lease
