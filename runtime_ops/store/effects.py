"""The idempotency ledger (the seed article's run-record pattern) over the state store.

`claim(key)` says what to do with a side effect derived from `key`: run it (new, or an earlier attempt
failed), skip it (finished: the stored result is returned), wait (another live owner is on it), or take over
(an owner started it and went quiet past `stale_after`: the caller resumes or compensates, knowing the effect
may have happened).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.sql import insert_ignore, utcnow


@dataclass(frozen=True)
class Claim:
    action: str  # run | skip | busy | takeover
    attempts: int
    result: Any = None


class EffectsMixin:
    @contextlib.contextmanager
    def tx(self) -> Iterator[Connection]:  # provided by StateStore
        raise NotImplementedError
        yield  # pragma: no cover

    def claim_effect(
        self,
        key: str,
        kind: str,
        owner: str,
        *,
        now: datetime | None = None,
        stale_after: timedelta = timedelta(minutes=10),
    ) -> Claim:
        now = now or utcnow()
        e = t.effects
        with self.tx() as conn:
            new = conn.execute(
                insert_ignore(e, conn).values(
                    key=key, kind=kind, status="started", owner=owner, attempts=1, started_at=now
                )
            )
            if new.rowcount:
                return Claim("run", 1)
            row = conn.execute(select(e).where(e.c.key == key)).one()
            if row.status == "finished":
                return Claim("skip", row.attempts, row.result)
            # Take it over when it failed, or when its owner went quiet (compare-and-set on the row we saw).
            takeover = row.status == "failed" or row.started_at <= now - stale_after
            if not takeover:
                return Claim("busy", row.attempts)
            res = conn.execute(
                update(e)
                .where(
                    and_(
                        e.c.key == key,
                        e.c.attempts == row.attempts,
                        or_(e.c.status == "failed", e.c.started_at <= now - stale_after),
                    )
                )
                .values(status="started", owner=owner, attempts=row.attempts + 1, started_at=now, error=None)
            )
            if not res.rowcount:
                return Claim("busy", row.attempts)
            return Claim("run" if row.status == "failed" else "takeover", row.attempts + 1)

    def finish_effect(self, key: str, result: Any = None, *, now: datetime | None = None) -> None:
        with self.tx() as conn:
            conn.execute(
                update(t.effects)
                .where(t.effects.c.key == key)
                .values(status="finished", finished_at=now or utcnow(), result=result)
            )

    def fail_effect(self, key: str, error: str) -> None:
        with self.tx() as conn:
            conn.execute(update(t.effects).where(t.effects.c.key == key).values(status="failed", error=error[:2000]))

    def effect(self, key: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.effects).where(t.effects.c.key == key)).first()
            return dict(row._mapping) if row else None
