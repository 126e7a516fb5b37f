"""Evaluation reports of a pipeline's candidates against its production model."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, insert, select

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository, row_dict

_R = t.eval_reports


class Evaluations(Repository):
    def record_eval_report(self, **values: Any) -> dict[str, Any]:
        values["pipeline"] = self.owner("record an evaluation report")
        values.setdefault("created_at", utcnow())
        with self.tx() as conn:
            res = conn.execute(insert(_R).values(**values))
            assert res.inserted_primary_key is not None  # a one-row insert always has its key
            values["id"] = int(res.inserted_primary_key[0])
            return values

    def latest_eval_report(self, candidate_version: int | None = None) -> dict[str, Any] | None:
        q = select(_R).where(self.owned(_R)).order_by(_R.c.id.desc()).limit(1)
        if candidate_version is not None:
            q = q.where(and_(_R.c.candidate_version == candidate_version, self.versioned(_R)))
        with self.tx() as conn:
            return row_dict(conn.execute(q).first())

    def eval_history(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest report of each of the last `limit` evaluated candidate versions (of every pipeline when
        unscoped: a version is one pipeline's), oldest first."""
        newest = (
            select(func.max(_R.c.id))
            .where(self.owned(_R))
            .group_by(_R.c.pipeline, _R.c.candidate_version)
            .scalar_subquery()
        )
        q = select(_R.c.pipeline, _R.c.candidate_version, _R.c.candidate_metrics, _R.c.verdict).where(
            _R.c.id.in_(newest)
        )
        with self.tx() as conn:
            ordered = q.order_by(_R.c.candidate_version.desc(), _R.c.pipeline).limit(limit)
            rows = [dict(x._mapping) for x in conn.execute(ordered)]
        return rows[::-1]

    def get_eval_report(self, report_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            return row_dict(conn.execute(select(_R).where(and_(_R.c.id == report_id, self.owned(_R)))).first())
