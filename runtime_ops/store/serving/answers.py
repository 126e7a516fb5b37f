"""Answers `rag_answers` produced, per pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository

_A = t.answers


class Answers(Repository):
    def record_answers(self, rows: Sequence[dict[str, Any]]) -> None:
        pipeline = self.owner("record answers")
        now = utcnow()
        with self.tx() as conn:
            conn.execute(insert(_A), [{**r, "pipeline": pipeline, "created_at": now} for r in rows])

    def latest_answers(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_A).where(self.owned(_A)).order_by(_A.c.id.desc()).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]
