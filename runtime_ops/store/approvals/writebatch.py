"""The writes of one decision (vote, audit records, request update, delivery), as one round trip.

Textual SQL on purpose: PostgreSQL takes the whole batch as one multi-statement execution (the hot path of a
Slack click), SQLite gets the same statements one by one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, bindparam, text
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.approvals.audit import chain_record


@dataclass
class WriteBatch:
    """The writes of one decision, sent to PostgreSQL as one multi-statement round trip.

    The rows are locked and every check done before they are sent, so batching changes no outcome; SQLite (one
    statement per call) gets the same statements one by one. The delivery insert goes last so the batch's row
    count says whether this click was new.
    """

    key: bytes  # the audit chain's key (Audit.key)
    vote: dict[str, Any] | None = None
    audits: list[dict[str, Any]] = field(default_factory=list)
    request_id: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    delivery: dict[str, Any] | None = None

    def audit(self, chain: str, head: tuple[int, str], **fields: Any) -> dict[str, Any]:
        record = chain_record(chain, head, self.key, **fields)
        self.audits.append(record)
        return record

    def statements(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        if self.vote:
            out.append((_SQL_VOTE, {f"v_{k}": v for k, v in self.vote.items()}))
        for i, rec in enumerate(self.audits):
            sql = _SQL_AUDIT.replace(":a_", f":a{i}_")
            out.append((sql, {f"a{i}_{k}": v for k, v in rec.items()}))
        if self.request_id:
            sets = ", ".join(f"{k} = :u_{k}" for k in self.changes)
            out.append(
                (
                    f"UPDATE approval_requests SET {sets} WHERE id = :u_rid",
                    {"u_rid": self.request_id, **{f"u_{k}": v for k, v in self.changes.items()}},
                )
            )
        if self.delivery:
            out.append((_SQL_DELIVERY, {f"d_{k}": v for k, v in self.delivery.items()}))
        return out

    def flush(self, conn: Connection) -> int:
        """Run the writes; returns the row count of the last one (the delivery insert when there is one)."""
        parts = self.statements()
        if not parts:
            return 0
        if conn.dialect.name == "postgresql":
            params = {k: v for _, p in parts for k, v in p.items()}
            sql = ";\n".join(sql for sql, _ in parts)
            return int(conn.execute(_typed_text(sql, tuple(sorted(params))), params).rowcount or 0)
        count = 0
        for sql, p in parts:
            count = int(conn.execute(_typed_text(sql, tuple(sorted(p))), p).rowcount or 0)
        return count


_SQL_VOTE = (
    "INSERT INTO approval_votes (request_id, actor, vote, channel, created_at) "
    "VALUES (:v_request_id, :v_actor, :v_vote, :v_channel, :v_created_at)"
)
_SQL_AUDIT = (
    "INSERT INTO audit_log (chain, seq, at, request_id, event, actor, channel, outcome, detail, prev_hash, hash, "
    "key_id) VALUES (:a_chain, :a_seq, :a_at, :a_request_id, :a_event, :a_actor, :a_channel, :a_outcome, "
    ":a_detail, :a_prev_hash, :a_hash, :a_key_id)"
)
_SQL_DELIVERY = (
    "INSERT INTO interaction_deliveries (dedupe_key, request_id, outcome, message, created_at) "
    "VALUES (:d_dedupe_key, :d_request_id, :d_outcome, :d_message, :d_created_at) ON CONFLICT DO NOTHING"
)
_DATETIME_PARAMS = ("_at", "_created_at", "_decided_at")


@functools.lru_cache(maxsize=256)
def _typed_text(sql: str, names: tuple[str, ...]) -> Any:
    """A text() statement whose datetime and JSON parameters are typed (so both backends store them alike)."""
    binds = []
    for name in names:
        if name.endswith(_DATETIME_PARAMS):
            binds.append(bindparam(name, type_=t.UTCDateTime()))
        elif name.endswith("_detail"):
            binds.append(bindparam(name, type_=JSON()))
    return text(sql).bindparams(*binds)
