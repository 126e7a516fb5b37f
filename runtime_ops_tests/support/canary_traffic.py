"""Canary traffic written as the ops API writes it (query records, then feedback on them), for tests whose subject is
what the evidence decides rather than how requests arrive (the HTTP path has tests of its own: test_ramp.py)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from runtime_ops.online.arms import CANDIDATE, PRODUCTION
from runtime_ops.online.query_records import QueryRecord, ShownItem
from runtime_ops.online.request_ids import new_request_id
from runtime_ops.store import StateStore


def canary_traffic(
    store: StateStore, rollout: dict[str, Any], *, n: int, candidate_rate: float, production_rate: float, seed: int
) -> None:
    """`n` logged requests of the canary `rollout` (every other one on each arm; all on the candidate when the
    rollout serves it to every session, as serving does), each showing one item; a request of an arm gets a click
    with that arm's rate."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    records: list[QueryRecord] = []
    for i in range(n):
        arm = CANDIDATE if i % 2 or float(rollout["share"]) >= 1.0 else PRODUCTION
        candidate = arm == CANDIDATE
        records.append(
            QueryRecord(
                request_id=new_request_id(now),
                pipeline=str(rollout["pipeline"]),
                route="search",
                arm=arm,
                created_at=now,
                k=5,
                latency_ms=1.0,
                production_version=None if candidate else int(rollout["production_version"]),
                production_index=None,
                session_hash=f"s{seed}-{i}",
                candidate_version=int(rollout["candidate_version"]) if candidate else None,
                candidate_index=int(rollout["candidate_index_id"]) if candidate else None,
                rollout_id=int(rollout["id"]),
                items=(ShownItem(rank=1, chunk_id=1000 + i, document_id=1, document_key="doc.md"),),
            )
        )
    store.query_log.record(records)
    for r in records:
        if rng.random() < (candidate_rate if r.arm == CANDIDATE else production_rate):
            store.query_log.add_feedback(r.request_id, r.items[0].chunk_id, "click", None, "traffic", now)
