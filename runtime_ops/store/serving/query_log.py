"""The query log and the feedback on it: records (each with the items it showed, one JSON list) written in batches,
read back by request id, feedback inserted once per (request, chunk, signal), and retention by age.

The ops API serves every pipeline and writes their records together (`record`: one transaction per batch, each
record with all its shown items or not at all), so writes are allowed on an unscoped store; a scoped store refuses
another pipeline's records and reads only its own.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, delete, func, insert, select

from runtime_ops.online.arms import CANDIDATE, INTERLEAVED, PRODUCTION
from runtime_ops.online.concentration import Source
from runtime_ops.online.evidence import POSITIVE_SIGNALS, ArmRequests, InterleavedQuery, OnlineInputs, ShadowSums
from runtime_ops.online.query_records import QueryRecord
from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert
from runtime_ops.store.scope import Repository

_Q, _F, _RO = t.query_records, t.feedback, t.rollouts


@dataclass(frozen=True)
class LoggedRequest:
    """A request as the query log holds it: its record's columns and the items it showed, in rank order."""

    record: dict[str, Any]

    @property
    def items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.record["items"]
        return items

    def item(self, chunk_id: int) -> dict[str, Any] | None:
        return next((i for i in self.items if i["chunk_id"] == chunk_id), None)


def _row(r: QueryRecord) -> dict[str, Any]:
    return {
        "request_id": r.request_id,
        "pipeline": r.pipeline,
        "route": r.route,
        "arm": r.arm,
        "session_hash": r.session_hash,
        "key_id": r.key_id,
        "query_text": r.query_text,
        "query_hash": r.query_hash,
        "k": r.k,
        "created_at": r.created_at,
        "latency_ms": r.latency_ms,
        "n_results": r.n_results,
        "production_version": r.production_version,
        "production_index": r.production_index,
        "candidate_version": r.candidate_version,
        "candidate_index": r.candidate_index,
        "rollout_id": r.rollout_id,
        "shared_prefix": r.shared_prefix,
        "items": [
            {
                "rank": i.rank,
                "chunk_id": i.chunk_id,
                "document_id": i.document_id,
                "document_key": i.document_key,
                "team": i.team,
            }
            for i in r.items
        ],
    }


class QueryLog(Repository):
    def record(self, records: Sequence[QueryRecord]) -> None:
        """Write `records`, each with its shown items, in one transaction: all of them or none."""
        if not records:
            return
        foreign = {r.pipeline for r in records} - {self.pipeline} if self.pipeline is not None else set()
        if foreign:
            raise ValueError(f"query records of {sorted(foreign)} given to pipeline {self.pipeline!r}'s query log")
        with self.tx() as conn:
            conn.execute(insert(_Q), [_row(r) for r in records])

    def get(self, request_id: str) -> LoggedRequest | None:
        """The logged request (a standalone read: on SQLite it takes no write lock and waits for no writer)."""
        rows = self.fetch(select(_Q).where(_Q.c.request_id == request_id, self.owned(_Q)))
        return LoggedRequest(dict(rows[0]._mapping)) if rows else None

    def add_feedback(
        self, request_id: str, chunk_id: int, signal: str, value: float | None, key_id: str, now: datetime
    ) -> bool:
        """Record one piece of feedback; False (and nothing written) when the same (request, chunk, signal) was
        recorded before."""
        row = {"request_id": request_id, "chunk_id": chunk_id, "signal": signal, "value": value,
               "key_id": key_id, "created_at": now}  # fmt: skip
        with self.tx() as conn:
            stmt = (
                upsert(_F, conn)
                .values(**row)
                .on_conflict_do_nothing(index_elements=["request_id", "chunk_id", "signal"])
            )
            return conn.execute(stmt).rowcount == 1

    def feedback_for(self, request_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_F).join(_Q, _Q.c.request_id == _F.c.request_id).where(_F.c.request_id == request_id)
            return [dict(r._mapping) for r in conn.execute(q.where(self.owned(_Q)).order_by(_F.c.id))]

    def feedback_with_text(self, *, page: int = 1000) -> Iterator[tuple[str, str, int, str, str]]:
        """Every piece of feedback on a request whose query text was kept, `page` rows per short transaction:
        (request id, query text, chunk id, the shown item's document key, signal). Only `queries: {log: text}` keeps
        text, and retention deletes a record with its feedback, so nothing it deleted is read back."""

        def after(last: int) -> Select[Any]:
            return (
                select(_F.c.id, _Q.c.request_id, _Q.c.query_text, _Q.c["items"], _F.c.chunk_id, _F.c.signal)
                .join(_Q, _F.c.request_id == _Q.c.request_id)
                .where(self.owned(_Q), _Q.c.query_text.is_not(None), _F.c.id > last)
                .order_by(_F.c.id)
                .limit(page)
            )

        for rows in self.pages(after):
            for row in rows:
                # Feedback is accepted only on a shown item (422 otherwise), so its item is in the list.
                key = next((i["document_key"] for i in row._mapping["items"] if i["chunk_id"] == row.chunk_id), None)
                if key is not None:
                    yield row.request_id, row.query_text, int(row.chunk_id), key, row.signal

    def counts(self) -> dict[str, int]:
        """Rows in this scope: records, feedback."""
        with self.tx() as conn:
            ids = select(_Q.c.request_id).where(self.owned(_Q))
            return {
                "records": conn.execute(select(func.count()).select_from(_Q).where(self.owned(_Q))).scalar_one(),
                "feedback": conn.execute(select(func.count()).where(_F.c.request_id.in_(ids))).scalar_one(),
            }

    def judgements(self, start: datetime, end: datetime) -> tuple[int, int]:
        """Judgements given in [start, end) on results production served alone (arm `production`, as the live
        quality rules count them): (helpful, helpful + not_helpful)."""
        q = (
            select(_F.c.signal, func.count())
            .join(_Q, _Q.c.request_id == _F.c.request_id)
            .where(
                self.owned(_Q),
                _Q.c.arm == PRODUCTION,
                _F.c.signal.in_(("helpful", "not_helpful")),
                _F.c.created_at >= start,
                _F.c.created_at < end,
            )
            .group_by(_F.c.signal)
        )
        counts = {str(signal): int(n) for signal, n in self.fetch(q)}
        return counts.get("helpful", 0), counts.get("helpful", 0) + counts.get("not_helpful", 0)

    def delete_before(self, cutoff: datetime, *, batch: int = 1000) -> int:
        """Delete this scope's records older than `cutoff` with their feedback, `batch` records per
        transaction (a long purge never holds one long lock); the number of records deleted."""
        deleted = 0
        while True:
            with self.tx() as conn:
                old = conn.execute(
                    select(_Q.c.request_id).where(self.owned(_Q), _Q.c.created_at < cutoff).limit(batch)
                ).scalars().all()  # fmt: skip
                if not old:
                    return deleted
                conn.execute(delete(_F).where(_F.c.request_id.in_(old)))
                conn.execute(delete(_Q).where(_Q.c.request_id.in_(old)))
            deleted += len(old)

    def online_inputs(self, rollout_id: int) -> OnlineInputs:
        """What rollout `rollout_id`'s evidence needs (`online.evidence`): its requests by arm, the ranks of their
        positive feedback, and its shadow sums. Three reads: the rollout row, its requests (by the partial index on
        rollout_id), and their positive feedback. An unknown rollout (or another pipeline's) reads as empty."""
        with self.tx() as conn:
            row = conn.execute(select(_RO).where(_RO.c.id == rollout_id, self.owned(_RO))).first()
            if row is None:
                return OnlineInputs(rollout_id=rollout_id)
            mine = and_(_Q.c.rollout_id == rollout_id, self.owned(_Q))
            records = conn.execute(
                select(
                    _Q.c.request_id, _Q.c.arm, _Q.c.k, _Q.c["items"], _Q.c.shared_prefix, _Q.c.key_id,
                    _Q.c.session_hash, _Q.c.query_hash,
                ).where(mine)
            ).all()  # fmt: skip
            ids = select(_Q.c.request_id).where(mine)
            feedback = conn.execute(
                select(_F.c.request_id, _F.c.chunk_id).where(
                    _F.c.request_id.in_(ids), _F.c.signal.in_(POSITIVE_SIGNALS)
                )
            ).all()
        positive: dict[str, set[int]] = defaultdict(set)
        for f in feedback:
            positive[f.request_id].add(int(f.chunk_id))
        interleaved: list[InterleavedQuery] = []
        alone: dict[str, list[int | None]] = {PRODUCTION: [], CANDIDATE: []}
        sources: dict[str, list[Source]] = {PRODUCTION: [], CANDIDATE: []}
        for r in records:
            liked = positive.get(r.request_id, set())
            ranks = sorted(int(i["rank"]) for i in r.items if int(i["chunk_id"]) in liked)
            source = Source(r.key_id, r.session_hash, r.query_hash)
            if r.arm == INTERLEAVED:
                teams = tuple(str(i["team"]) for i in sorted(r.items, key=lambda i: int(i["rank"])))
                interleaved.append(InterleavedQuery(teams, tuple(ranks), int(r.shared_prefix or 0), source))
            elif r.arm in alone:
                alone[r.arm].append(ranks[0] if ranks else None)
                sources[r.arm].append(source)
        ks = Counter(int(r.k) for r in records)
        return OnlineInputs(
            rollout_id=rollout_id,
            interleaved=tuple(interleaved),
            candidate=ArmRequests(tuple(alone[CANDIDATE]), tuple(sources[CANDIDATE])),
            production=ArmRequests(tuple(alone[PRODUCTION]), tuple(sources[PRODUCTION])),
            share=float(row.share),
            shadow=ShadowSums(
                queries=int(row.shadow_queries),
                overlap_sum=float(row.shadow_overlap_sum),
                overlap_sq_sum=float(row.shadow_overlap_sq_sum),
                log_latency_ratio_sum=float(row.shadow_log_latency_ratio_sum),
                log_latency_ratio_sq_sum=float(row.shadow_log_latency_ratio_sq_sum),
                k=ks.most_common(1)[0][0] if ks else 10,
            ),
        )
