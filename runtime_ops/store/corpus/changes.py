"""The corpus change feed: which documents became current (`add`) or stopped being current (`remove`), in commit
order per pipeline. Vector indexes replay it from the last change they applied, so keeping an index in step costs
O(changes), never a scan of the corpus."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository

_F, _N = t.corpus_changes, t.change_counters

ADD, REMOVE = "add", "remove"


@dataclass(frozen=True)
class Change:
    seq: int
    document_id: int
    op: str


def append_changes(conn: Connection, pipeline: str, changes: Sequence[tuple[int, str]]) -> int:
    """Append (document id, op) changes inside the caller's transaction; returns the pipeline's newest seq.

    The seqs come from the pipeline's counter row, updated (so locked) here and released when the caller commits:
    a second writer waits for this one to commit before it takes the next numbers, which makes seq order the
    commit order. Without that, a reader could apply seq 12 while seq 11 is still uncommitted and skip it forever.
    """
    if not changes:
        return 0
    conn.execute(upsert(_N, conn).values(pipeline=pipeline, seq=0).on_conflict_do_nothing())
    last = int(
        conn.execute(
            update(_N).where(_N.c.pipeline == pipeline).values(seq=_N.c.seq + len(changes)).returning(_N.c.seq)
        ).scalar_one()
    )
    now = utcnow()
    first = last - len(changes) + 1
    conn.execute(
        insert(_F),
        [
            {"pipeline": pipeline, "seq": first + i, "document_id": doc, "op": op, "created_at": now}
            for i, (doc, op) in enumerate(changes)
        ],
    )
    return last


class CorpusChanges(Repository):
    def head(self) -> int:
        """The newest committed seq of the scope's pipeline (0: no change yet)."""
        with self.tx() as conn:
            q = select(_N.c.seq).where(_N.c.pipeline == self.owner("read the change feed"))
            return int(conn.execute(q).scalar() or 0)

    def since(self, seq: int, limit: int = 1000) -> list[Change]:
        """Up to `limit` changes after `seq`, oldest first."""
        with self.tx() as conn:
            rows = conn.execute(
                select(_F.c.seq, _F.c.document_id, _F.c.op)
                .where(and_(_F.c.pipeline == self.owner("read the change feed"), _F.c.seq > seq))
                .order_by(_F.c.seq)
                .limit(limit)
            ).all()
        return [Change(int(r.seq), int(r.document_id), str(r.op)) for r in rows]

    def pending(self, seq: int, op: str | None = None) -> int:
        """How many changes (of kind `op`, or all) follow `seq` (an index's backlog)."""
        cond = and_(_F.c.pipeline == self.owner("read the change feed"), _F.c.seq > seq)
        if op is not None:
            cond = and_(cond, _F.c.op == op)
        with self.tx() as conn:
            return int(conn.execute(select(func.count()).where(cond)).scalar() or 0)
