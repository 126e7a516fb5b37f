"""Production's judgements, as the live-quality CUSUM reads them (`observability/quality.py`): the `helpful` and
`not_helpful` feedback on the requests production's arm served with one model version, by the request's time.

Read through the query log's (pipeline, created_at) index, then each request's feedback by its unique
(request_id, chunk_id, signal) index: a read of a time range costs what that range holds, not the whole log.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from runtime_ops.online.arms import PRODUCTION
from runtime_ops.online.quality_cusum import HELPFUL, JUDGEMENTS
from runtime_ops.store import schema as t
from runtime_ops.store.scope import Repository

_Q, _F = t.query_records, t.feedback


class Judgements(Repository):
    def of_production(self, version: int, start: datetime, end: datetime) -> list[tuple[datetime, bool]]:
        """(request time, helpful?) of each judgement on a request production served with model `version` in
        [start, end), in request-time order. A standalone read: no transaction held, no writer waited for."""
        q = (
            select(_Q.c.created_at, _F.c.signal)
            .join(_F, _F.c.request_id == _Q.c.request_id)
            .where(
                self.versioned(_Q),
                _Q.c.created_at >= start,
                _Q.c.created_at < end,
                _Q.c.arm == PRODUCTION,
                _Q.c.production_version == version,
                _F.c.signal.in_(JUDGEMENTS),
            )
            .order_by(_Q.c.created_at)
        )
        return [(row.created_at, row.signal == HELPFUL) for row in self.fetch(q)]
