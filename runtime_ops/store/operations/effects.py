"""The idempotency ledger (the seed article's run-record pattern), one per pipeline.

`claim_effect(key)` says what to do with a side effect derived from `key`: run it (new, or an earlier attempt
failed), skip it (finished: the stored result is returned), wait (another live owner is on it), or take over
(an owner started it and went quiet past `stale_after`: the caller resumes or compensates, knowing the effect
may have happened).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository, row_dict

_E = t.effects


@dataclass(frozen=True)
class Claim:
    action: str  # run | skip | busy | takeover
    attempts: int
    result: Any = None


class Effects(Repository):
    def _key(self, key: str, what: str) -> Any:
        return and_(_E.c.pipeline == self.owner(what), _E.c.key == key)

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
        this = self._key(key, "claim an effect")
        with self.tx() as conn:
            new = conn.execute(
                upsert(_E, conn)
                .values(
                    pipeline=self.pipeline,
                    key=key,
                    kind=kind,
                    status="started",
                    owner=owner,
                    attempts=1,
                    started_at=now,
                )
                .on_conflict_do_nothing()
            )
            if new.rowcount:
                return Claim("run", 1)
            row = conn.execute(select(_E).where(this)).one()
            if row.status == "finished":
                return Claim("skip", row.attempts, row.result)
            # Take it over when it failed, or when its owner went quiet (compare-and-set on the row we saw).
            takeover = row.status == "failed" or row.started_at <= now - stale_after
            if not takeover:
                return Claim("busy", row.attempts)
            res = conn.execute(
                update(_E)
                .where(
                    and_(
                        this,
                        _E.c.attempts == row.attempts,
                        or_(_E.c.status == "failed", _E.c.started_at <= now - stale_after),
                    )
                )
                .values(status="started", owner=owner, attempts=row.attempts + 1, started_at=now, error=None)
            )
            if not res.rowcount:
                return Claim("busy", row.attempts)
            return Claim("run" if row.status == "failed" else "takeover", row.attempts + 1)

    def finish_effect(self, key: str, result: Any = None, *, now: datetime | None = None) -> None:
        this = self._key(key, "finish an effect")
        with self.tx() as conn:
            conn.execute(update(_E).where(this).values(status="finished", finished_at=now or utcnow(), result=result))

    def fail_effect(self, key: str, error: str) -> None:
        this = self._key(key, "fail an effect")
        with self.tx() as conn:
            conn.execute(update(_E).where(this).values(status="failed", error=error[:2000]))

    def effect(self, key: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            q = select(_E).where(and_(_E.c.key == key, self.owned(_E))).order_by(_E.c.pipeline).limit(1)
            return row_dict(conn.execute(q).first())
