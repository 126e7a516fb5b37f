"""What the query log records of one search/answer request, and what feedback on it says (pure: no I/O).

The shapes are fixed by issue 27's design: every request gets a record whatever `queries.log` says (its arm, the
model version and index of each arm, the items shown in order); only the query's text and hash follow the pipeline's
declaration. `team` of a shown item and the candidate fields are set for rollout arms only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from runtime_ops.online.arms import CANDIDATE, INTERLEAVED, PRODUCTION

ARMS = (PRODUCTION, CANDIDATE, INTERLEAVED)
TEAMS = (PRODUCTION, CANDIDATE)
ROUTES = ("search", "answer")
SIGNALS = ("click", "helpful", "not_helpful")


@dataclass(frozen=True)
class ShownItem:
    rank: int  # 1-based place in the list shown
    chunk_id: int
    document_id: int
    document_key: str
    team: str | None = None  # the arm that drafted it, for interleaved requests only


@dataclass(frozen=True)
class QueryRecord:
    request_id: str
    pipeline: str
    route: str  # "search" | "answer"
    arm: str
    created_at: datetime
    k: int
    latency_ms: float
    production_version: int | None  # None: production did not serve it (a canary request)
    production_index: int | None
    query_text: str | None = None  # only when the pipeline declares `queries: {log: text}`
    query_hash: str | None = None  # None only under `log: off`
    session_hash: str | None = None
    key_id: str | None = None  # the API key that made the request (feedback is accepted from it alone)
    candidate_version: int | None = None
    candidate_index: int | None = None
    rollout_id: int | None = None
    shared_prefix: int | None = None  # interleaved only: leading ranks both rankings shared (online/credit.py)
    items: tuple[ShownItem, ...] = field(default_factory=tuple)

    @property
    def n_results(self) -> int:
        return len(self.items)
