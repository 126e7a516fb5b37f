"""Locks on the SQL state store (PostgreSQL or SQLite): the embedded default when REDIS_URL is unset.

Same semantics as the Redis locker. One row per lock name in `locks`:

- acquire: one statement in one transaction, `INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE the row is
  free or expired RETURNING fence` - a compare-and-set that takes the row and increments its fence, or changes
  nothing when a live lease holds it (then the holder and its remaining time are read for the waiter);
- release: `UPDATE ... SET token = NULL` where the token matches and the lease has not expired;
- extend: `UPDATE ... SET expires_at_ms = now + ttl` under the same condition.

The row is never deleted, so its fence keeps counting up across acquisitions. A new row's fence starts at the
database clock in microseconds (like the Redis counter), so switching between backends does not restart the
fences below tokens the store already accepted.

Time: every expiry is written and compared on the *database* clock, inside the statement (`clock_timestamp()`
on PostgreSQL, `julianday('now')` on SQLite), as integer milliseconds since the Unix epoch. With several hosts
on one PostgreSQL, leases then expire by one clock: a host whose clock runs ahead cannot take a lease that is
still live, nor extend one that already expired. (SQLite lives on one host, whose clock is the database's.)
The caller's `Lease.acquired_at` is a local monotonic reading taken before the request, for a conservative
local estimate of the expiry only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, bindparam, literal_column, or_, select, update
from sqlalchemy.exc import InterfaceError, OperationalError

from runtime_ops.locks.base import Held, Lease, LockerBase, LockUnavailable
from runtime_ops.observability.metric_writes import LockWaitRecorder
from runtime_ops.observability.redaction import redact_url
from runtime_ops.store.engine import upsert
from runtime_ops.store.schema import locks

if TYPE_CHECKING:
    from runtime_ops.store import StateStore

_NOW_MS = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    # julianday('now') has millisecond resolution; ROUND undoes the float error before the cast.
    "sqlite": "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
}


def _now_ms(dialect: str) -> Any:
    try:
        return literal_column(_NOW_MS[dialect], BigInteger)
    except KeyError:
        raise NotImplementedError(f"the state-store lock supports PostgreSQL and SQLite, not {dialect}") from None


class _Statements:
    """The four statements, built once per dialect with bind parameters (compiled once by SQLAlchemy)."""

    def __init__(self, dialect: str) -> None:
        now = _now_ms(dialect)
        ttl = bindparam("ttl", type_=BigInteger)
        ins = upsert(locks, dialect).values(
            name=bindparam("lock_name"), token=bindparam("lock_token"), expires_at_ms=now + ttl, fence=now * 1000
        )
        self.acquire = ins.on_conflict_do_update(
            index_elements=[locks.c.name],
            set_={
                "token": ins.excluded.token,
                "expires_at_ms": ins.excluded.expires_at_ms,
                "fence": locks.c.fence + 1,
            },
            where=or_(locks.c.token.is_(None), locks.c.expires_at_ms <= now),
        ).returning(locks.c.fence)
        self.holder = select(locks.c.token, (locks.c.expires_at_ms - now).label("remaining_ms")).where(
            locks.c.name == bindparam("lock_name")
        )
        live = (
            (locks.c.name == bindparam("lock_name"))
            & (locks.c.token == bindparam("lock_token"))
            & (locks.c.expires_at_ms > now)
        )
        self.release = update(locks).where(live).values(token=None, expires_at_ms=now)
        self.extend = update(locks).where(live).values(expires_at_ms=now + bindparam("ttl", type_=BigInteger))


class StoreLocker(LockerBase):
    """Locks in the state store's `locks` table (the store must be migrated to revision 0003 or later)."""

    def __init__(self, store: StateStore, *, wait_metrics: bool = True) -> None:
        self.store = store
        self._sql = _Statements(store.dialect)
        if wait_metrics:  # every acquire's wait goes to the lock-wait histogram in the same store
            self.wait_observer = LockWaitRecorder(store.metrics)

    def _unavailable(self, exc: BaseException) -> LockUnavailable:
        url = redact_url(self.store.engine.url.render_as_string(hide_password=False))
        return LockUnavailable(
            f"lock backend unreachable: the state store at RUNTIME_OPS_DATABASE_URL={url} (used for locks "
            f"because REDIS_URL is unset) failed ({type(exc).__name__}: {str(exc).strip().splitlines()[0]}); "
            "protected work is refused until it is back"
        )

    def _try_acquire(self, name: str, token: str, ttl_ms: int) -> int | Held:
        try:
            with self.store.tx() as conn:
                params = {"lock_name": name, "lock_token": token, "ttl": ttl_ms}
                fence = conn.execute(self._sql.acquire, params).scalar()
                if fence is not None:
                    return int(fence)
                row = conn.execute(self._sql.holder, {"lock_name": name}).first()
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from exc
        if row is None:  # cannot happen: the INSERT found a row it did not take
            return Held(None, None)
        return Held(row.token, int(row.remaining_ms))

    def release(self, lease: Lease) -> bool:
        """Free the lock when `lease` still holds it; False when it had expired or belongs to someone else."""
        try:
            with self.store.tx() as conn:
                res = conn.execute(self._sql.release, {"lock_name": lease.name, "lock_token": lease.token})
                return res.rowcount == 1
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from exc

    def extend(self, lease: Lease, ttl_ms: int | None = None) -> bool:
        """Reset the lease's TTL to `ttl_ms` (default: its own) from now; False when it is no longer held."""
        ttl = self._extension_ttl(lease, ttl_ms)
        sent = time.monotonic()
        try:
            with self.store.tx() as conn:
                params = {"lock_name": lease.name, "lock_token": lease.token, "ttl": ttl}
                ok = conn.execute(self._sql.extend, params).rowcount
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from exc
        if ok == 1:
            lease.ttl_ms, lease.renewed_at = ttl, sent
        return ok == 1

    def fence_of(self, name: str) -> int | None:
        """The last fence issued for `name` (None before the first acquisition)."""
        try:
            with self.store.tx() as conn:
                return conn.execute(select(locks.c.fence).where(locks.c.name == name)).scalar()
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from exc
