"""keyed audit chain: every audit record's hash becomes an HMAC-SHA256 under the audit key (RUNTIME_OPS_AUDIT_KEY,
kept outside the database); the existing chains are checked as they were (plain SHA-256) and then re-chained
under the key, heads included. A log already broken is refused, naming the record, rather than re-chained.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 11:00:00.000000
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

from runtime_ops.store.approvals.audit import create_settings_key, settings_key
from runtime_ops.store.approvals.chain import GENESIS, GLOBAL_CHAIN, canonical, record_hash
from runtime_ops.store.tables.base import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _unkeyed(prev_hash: str, record: dict) -> str:  # type: ignore[type-arg]
    return hashlib.sha256(f"{prev_hash}\n{canonical(record)}".encode()).hexdigest()


def _rechain(keyed: bool) -> None:
    from alembic import context

    conn = op.get_bind()
    # Typed as written (the timestamps and the JSON detail read back as the values that were hashed).
    log = sa.table(
        "audit_log",
        *(sa.column(c) for c in ("id", "chain", "seq", "request_id", "event", "actor", "channel", "outcome")),
        sa.column("at", UTCDateTime()),
        sa.column("detail", sa.JSON),
        sa.column("prev_hash"),
        sa.column("hash"),
    )
    # Read at the first record, so an empty log (a store being created) needs no key. Upgrading, this is where
    # the log gets its first key, so it may be made; downgrading, it must be the key the log was chained with.
    key = b""
    old: dict[str, str] = {}  # chain -> previous hash as stored
    new: dict[str, str] = {}  # chain -> previous hash re-computed
    last = 0
    while True:
        rows = conn.execute(sa.select(log).where(log.c.id > last).order_by(log.c.id).limit(5000)).mappings().all()
        if not rows:
            break
        for row in rows:
            rec = dict(row)
            settings = context.config.attributes["settings"]  # handed in by runtime_ops.store.migrate
            key = key or (create_settings_key(settings) if keyed else settings_key(settings))
            chain = str(rec["chain"])
            prev_old, prev_new = old.get(chain, GENESIS), new.get(chain, GENESIS)
            expected = _unkeyed(prev_old, rec) if keyed else record_hash(prev_old, rec, key)
            if rec["prev_hash"] != prev_old or rec["hash"] != expected:
                raise RuntimeError(
                    f"audit record {rec['id']} (chain {chain}) does not verify as it was written: the log was "
                    "altered before this upgrade; keep this database aside and restore one that verifies"
                )
            digest = record_hash(prev_new, rec, key) if keyed else _unkeyed(prev_new, rec)
            conn.execute(sa.update(log).where(log.c.id == rec["id"]).values(prev_hash=prev_new, hash=digest))
            old[chain], new[chain] = str(rec["hash"]), digest
        last = int(rows[-1]["id"])
    requests = sa.table("approval_requests", sa.column("id"), sa.column("audit_hash"))
    head = sa.table("audit_head", sa.column("id"), sa.column("last_hash"))
    for chain, digest in new.items():
        if chain == GLOBAL_CHAIN:
            conn.execute(sa.update(head).where(head.c.id == 1).values(last_hash=digest))
        else:
            conn.execute(sa.update(requests).where(requests.c.id == chain).values(audit_hash=digest))


def upgrade() -> None:
    _rechain(keyed=True)


def downgrade() -> None:
    _rechain(keyed=False)
