"""The append-only, hash-chained audit log: records, chain heads, verification.

Each approval request is its own chain (its head lives on the request row, which a decision locks anyway), so
clicks on different requests never wait for each other; records of no known request chain through
`audit_head`. The log is process-wide: it hangs off requests (which carry their pipeline) and is verified whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, bindparam, insert, literal, select, tuple_, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.approvals import audit_coverage
from runtime_ops.store.approvals import chain as chain_mod
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository

if TYPE_CHECKING:
    from runtime_ops.settings import Settings

_R, _L, _HEAD = t.approval_requests, t.audit_log, t.audit_head
_REQUEST_HEAD = select(_R.c.audit_seq, _R.c.audit_hash).where(_R.c.id == bindparam("rid")).with_for_update()
_SET_REQUEST_HEAD = (
    update(_R).where(_R.c.id == bindparam("rid")).values(audit_seq=bindparam("b_seq"), audit_hash=bindparam("b_hash"))
)
_GLOBAL_HEAD = select(_HEAD).where(_HEAD.c.id == 1).with_for_update()
_SET_GLOBAL_HEAD = (
    update(_HEAD).where(_HEAD.c.id == 1).values(last_id=bindparam("b_seq"), last_hash=bindparam("b_hash"))
)
_INSERT = insert(_L)


def chain_record(chain: str, head: tuple[int, str], key: bytes, **fields: Any) -> dict[str, Any]:
    """The audit record that follows `head` of `chain` (not yet written), MACed under `key`."""
    record = {
        "chain": chain,
        "seq": head[0] + 1,
        "at": fields.pop("now", None) or utcnow(),
        "request_id": fields.get("request_id"),
        "event": fields["event"],
        "actor": fields.get("actor"),
        "channel": fields.get("channel"),
        "outcome": fields.get("outcome"),
        "detail": fields.get("detail") or {},
        "prev_hash": head[1],
        # Which key MACed it, outside the MAC: it lets verify tell a wrong key from a forged record.
        "key_id": chain_mod.key_id(key),
    }
    record["hash"] = chain_mod.record_hash(head[1], record, key)
    return record


def settings_key(settings: Settings) -> bytes:
    """The audit key from `settings`, never created here (a missing one is a SettingsError naming the fix)."""
    return settings.resolved_audit_key().encode()


def create_settings_key(settings: Settings) -> bytes:
    """The audit key, made under RUNTIME_OPS_HOME when there is none: only for a store being created."""
    return settings.resolved_audit_key(create=True).encode()


class Audit(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, key: Callable[[], bytes]) -> None:
        super().__init__(engine, pipeline)
        self._key_source = key
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        """The chain's key, read once (from RUNTIME_OPS_AUDIT_KEY or the home's key file) when first needed."""
        if self._key is None:
            self._key = self._key_source()
        return self._key

    def append_in(self, conn: Connection, **fields: Any) -> dict[str, Any]:
        """Append, inside `conn`'s transaction, to the chain of `request_id` (locking its row) or, for no known
        request, the global chain."""
        request_id = fields.get("request_id")
        row = conn.execute(_REQUEST_HEAD, {"rid": request_id}).first() if request_id else None
        if request_id and row is not None:
            record = chain_record(request_id, (row.audit_seq, row.audit_hash), self.key, **fields)
            conn.execute(_INSERT, record)
            conn.execute(_SET_REQUEST_HEAD, {"rid": request_id, "b_seq": record["seq"], "b_hash": record["hash"]})
            return record
        head = conn.execute(_GLOBAL_HEAD).one()
        record = chain_record(chain_mod.GLOBAL_CHAIN, (head.last_id, head.last_hash), self.key, **fields)
        conn.execute(_INSERT, record)
        conn.execute(_SET_GLOBAL_HEAD, {"b_seq": record["seq"], "b_hash": record["hash"]})
        return record

    def append(self, **fields: Any) -> dict[str, Any]:
        """Append one record in its own transaction."""
        with self.tx() as conn:
            return self.append_in(conn, **fields)

    def records(self, request_id: str | None = None) -> list[dict[str, Any]]:
        q = select(_L).order_by(_L.c.id)
        if request_id is not None:
            q = q.where(_L.c.request_id == request_id)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def iter_records(self, page: int = 5000) -> Iterator[dict[str, Any]]:
        """Every record, chain by chain in position order (the ids say nothing: whoever writes the table sets
        them), read a page at a time."""
        after = ("", 0)
        while True:
            q = select(_L).where(tuple_(_L.c.chain, _L.c.seq) > tuple_(literal(after[0]), literal(after[1])))
            with self.tx() as conn:
                rows = conn.execute(q.order_by(_L.c.chain, _L.c.seq).limit(page)).all()
            if not rows:
                return
            for r in rows:
                yield dict(r._mapping)
            after = (rows[-1].chain, rows[-1].seq)

    def heads(self) -> dict[str, tuple[int, str]]:
        with self.tx() as conn:
            heads = {
                r.id: (int(r.audit_seq), str(r.audit_hash))
                for r in conn.execute(select(_R.c.id, _R.c.audit_seq, _R.c.audit_hash))
            }
            g = conn.execute(select(_HEAD).where(_HEAD.c.id == 1)).one()
            heads[chain_mod.GLOBAL_CHAIN] = (int(g.last_id), str(g.last_hash))
            return heads

    def verify(self, anchors: Iterable[chain_mod.Anchor] = ()) -> chain_mod.ChainReport:
        """Every chain checked under the key, against the heads kept beside the log and the given anchors; then
        the state the log audits (requests, votes, links, deliveries, promotions) checked for its records, which
        catches a log emptied or cut short together with its heads."""
        report = chain_mod.verify(self.iter_records(), self.key, heads=self.heads(), anchors=anchors)
        if not report.ok:
            return report
        with self.tx() as conn:
            missing = audit_coverage.first_missing(conn)
        if missing is not None:
            return chain_mod.ChainReport(False, report.records, None, missing, report.anchors)
        return report

    def rekey(self, new_key: bytes, anchors: Iterable[chain_mod.Anchor] = ()) -> int:
        """Re-chain every record under `new_key` in one transaction, after checking the log under the current key
        (and `anchors`); returns how many records were re-chained. The heads are locked meanwhile, so nothing is
        appended halfway; processes still holding the old key must be stopped first (what they append after would
        not verify)."""
        if not new_key:
            raise ValueError("the new audit key is empty")
        report = self.verify(anchors)
        if not report.ok:
            raise ValueError(
                f"the audit log does not verify under the current key, so it is not re-keyed: {report.problem}"
            )
        count, new_id = 0, chain_mod.key_id(new_key)
        with self.tx() as conn:
            conn.execute(_GLOBAL_HEAD).one()  # appends wait on these locks until the new chain is committed
            conn.execute(select(_R.c.id).with_for_update()).all()
            prev: dict[str, str] = {}
            after = ("", 0)
            while True:
                q = select(_L).where(tuple_(_L.c.chain, _L.c.seq) > tuple_(literal(after[0]), literal(after[1])))
                rows = conn.execute(q.order_by(_L.c.chain, _L.c.seq).limit(5000)).all()
                if not rows:
                    break
                for row in rows:
                    rec = dict(row._mapping)
                    link = prev.get(rec["chain"], chain_mod.GENESIS)
                    digest = chain_mod.record_hash(link, rec, new_key)
                    conn.execute(
                        update(_L).where(_L.c.id == rec["id"]).values(prev_hash=link, hash=digest, key_id=new_id)
                    )
                    prev[rec["chain"]] = digest
                    count += 1
                after = (rows[-1].chain, rows[-1].seq)
            for chain, digest in prev.items():
                if chain == chain_mod.GLOBAL_CHAIN:
                    conn.execute(update(_HEAD).where(_HEAD.c.id == 1).values(last_hash=digest))
                else:
                    conn.execute(update(_R).where(_R.c.id == chain).values(audit_hash=digest))
        self._key_source, self._key = (lambda: new_key), new_key
        return count
