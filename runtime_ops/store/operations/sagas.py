"""Persisted sagas (promotions): their steps and status, saved after every step, per pipeline."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, insert, select, update

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository, row_dict

_S = t.sagas


class Sagas(Repository):
    def load_saga(self, saga_id: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            return row_dict(conn.execute(select(_S).where(and_(_S.c.id == saga_id, self.owned(_S)))).first())

    def save_saga(
        self, saga_id: str, *, kind: str, status: str, steps: list[dict[str, Any]], error: str | None, owner: str | None
    ) -> None:
        pipeline = self.owner("save a saga")
        now = utcnow()
        with self.tx() as conn:
            res = conn.execute(
                update(_S)
                .where(and_(_S.c.id == saga_id, _S.c.pipeline == pipeline))
                .values(status=status, steps=steps, error=error, owner=owner, updated_at=now)
            )
            if not res.rowcount:
                conn.execute(
                    insert(_S).values(
                        id=saga_id,
                        pipeline=pipeline,
                        kind=kind,
                        status=status,
                        steps=steps,
                        error=error,
                        owner=owner,
                        created_at=now,
                        updated_at=now,
                    )
                )
