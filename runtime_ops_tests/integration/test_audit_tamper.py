"""An audit a database admin cannot rewrite (real PostgreSQL): the chain is keyed (HMAC) with a key outside the
database and its heads are anchored in an append-only file; `runtime-ops audit verify` names a deleted, an
inserted, an edited record, a chain truncated together with its head, and a chain re-written without the key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from runtime_ops.cli import main as cli
from runtime_ops.decisions.decide import decide
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store.approvals.chain import record_hash
from runtime_ops.store.engine import utcnow
from runtime_ops_tests.support.approvals_support import open_pending

KEY = "audit-key-kept-outside-the-database"


def _log(store: StateStore, request_id: str) -> list[dict[str, Any]]:
    return store.audit_log.records(request_id)


def _delete_middle(store: StateStore, rid: str) -> None:
    target = _log(store, rid)[1]["id"]
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log WHERE id = :id"), {"id": target})


def _insert_forged(store: StateStore, rid: str) -> None:
    """A record slipped in as #2: the later ones renumbered, it links to #1, the head's count moved on."""
    log = _log(store, rid)
    cols = ["chain", "seq", "at", "request_id", "event", "actor", "channel", "outcome", "prev_hash", "hash"]
    forged = {**{c: log[1][c] for c in cols}, "actor": "mallory", "event": "attempt"}
    with store.engine.begin() as conn:
        shift = "UPDATE audit_log SET seq = seq + :by WHERE chain = :c AND seq >= :from"
        conn.execute(text(shift), {"by": 1000, "c": rid, "from": 2})
        conn.execute(text(shift), {"by": -999, "c": rid, "from": 1002})
        conn.execute(
            text(
                f"INSERT INTO audit_log ({', '.join(cols)}, detail) VALUES ({', '.join(':' + c for c in cols)}, '{{}}')"
            ),
            forged,
        )
        conn.execute(text("UPDATE approval_requests SET audit_seq = audit_seq + 1 WHERE id = :id"), {"id": rid})


def _edit_actor(store: StateStore, rid: str) -> None:
    target = _log(store, rid)[1]["id"]
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE id = :id"), {"id": target})


def _truncate_with_head(store: StateStore, rid: str) -> None:
    log = _log(store, rid)
    keep = log[:-2]
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log WHERE id = ANY(:ids)"), {"ids": [r["id"] for r in log[-2:]]})
        conn.execute(
            text("UPDATE approval_requests SET audit_seq = :s, audit_hash = :h WHERE id = :id"),
            {"s": keep[-1]["seq"], "h": keep[-1]["hash"], "id": rid},
        )


def _rewrite_without_the_key(store: StateStore, rid: str) -> None:
    """Everything an admin can do without the key: edit, then re-chain every record and the head consistently."""
    prev = "0" * 64
    with store.engine.begin() as conn:
        for rec in _log(store, rid):
            rec = {**rec, "actor": "mallory" if rec["actor"] == "U2" else rec["actor"]}
            digest = record_hash(prev, rec, b"the admin's guess")
            conn.execute(
                text("UPDATE audit_log SET actor = :a, prev_hash = :p, hash = :h WHERE id = :id"),
                {"a": rec["actor"], "p": prev, "h": digest, "id": rec["id"]},
            )
            prev = digest
        conn.execute(text("UPDATE approval_requests SET audit_hash = :h WHERE id = :id"), {"h": prev, "id": rid})


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (_delete_middle, "were deleted"),
        (_insert_forged, "was inserted: record"),
        (_edit_actor, "modified or forged"),
        (_truncate_with_head, "was truncated: the anchor of"),
        (_rewrite_without_the_key, "modified or forged"),
    ],
)
def test_audit_verify_names_each_kind_of_tampering(
    env: Any, postgres_url: str, capsys: Any, tamper: Callable[[StateStore, str], None], named: str
) -> None:
    from runtime_ops.approvals.anchors import anchor_heads, open_sink

    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY)
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U2", "U3"), required_approvals=2))
    for actor in ("U2", "U9", "U3"):  # counted, refused, counted: five records in the request's chain
        decide(store, request["id"], actor=actor, vote="approve", channel="cli", now=utcnow())
    assert len(_log(store, request["id"])) >= 5
    sink = open_sink(get_settings().resolved_audit_anchors)
    assert (
        anchor_heads(store.audit_log, sink) is not None and anchor_heads(store.audit_log, sink) is None
    )  # nothing moved since
    assert cli(["audit", "verify"]) == 0
    assert "intact" in capsys.readouterr().out

    tamper(store, request["id"])
    assert cli(["audit", "verify"]) == 1
    err = capsys.readouterr().err
    assert "BROKEN" in err and named in err, err


def _hashes(store: StateStore) -> list[str]:
    """The records' MACs in id order, read with plain SQL (older schemas lack columns the table has now)."""
    with store.engine.begin() as conn:
        return list(conn.execute(text("SELECT hash FROM audit_log ORDER BY id")).scalars())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0013_rechains_an_unkeyed_log_and_refuses_an_altered_one(
    env: Any, request: pytest.FixtureRequest, tmp_path: Any, backend: str
) -> None:
    from runtime_ops.store.migrate import current_revision, downgrade, upgrade

    url = f"sqlite:///{tmp_path / 'state.db'}" if backend == "sqlite" else str(request.getfixturevalue("postgres_url"))
    env(database_url=url, RUNTIME_OPS_AUDIT_KEY=KEY)
    store = open_store(get_settings().resolved_database_url, get_settings())
    pending = open_pending(store, RequestPolicy(approvers=("U2", "U3"), required_approvals=2))
    for actor in ("U2", "U9", "U3"):
        decide(store, pending["id"], actor=actor, vote="approve", channel="cli", now=utcnow())
    store.audit_log.append(event="note", actor="ops", channel="cli", detail={"what": "a global record"})
    keyed = _hashes(store)

    downgrade(store.engine, get_settings(), "0012")  # the log as 0012 wrote it: plain SHA-256, no key
    unkeyed = _hashes(store)
    assert len(unkeyed) == len(keyed) >= 6 and not set(unkeyed) & set(keyed)
    upgrade(store.engine, get_settings(), "0013")
    assert current_revision(store.engine) == "0013"
    assert _hashes(store) == keyed
    upgrade(store.engine, get_settings())  # the records 0013 re-chained verify at the newest schema (which reads them)
    assert store.audit_log.verify().ok

    downgrade(store.engine, get_settings(), "0012")
    with store.engine.begin() as conn:  # altered before the upgrade: 0013 must not bless it with the key
        altered = conn.execute(text("SELECT id FROM audit_log WHERE chain = :c AND seq = 2"), {"c": pending["id"]})
        altered = altered.scalar_one()
        conn.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE id = :id"), {"id": altered})
    with pytest.raises(RuntimeError, match=f"audit record {altered} .*does not verify as it was written"):
        upgrade(store.engine, get_settings(), "0013")
    assert current_revision(store.engine) == "0012"


def test_audit_rekey_rotates_the_key_and_keeps_the_log_verifiable(
    env: Any, postgres_url: str, tmp_path: Any, capsys: Any
) -> None:
    from runtime_ops.approvals.anchors import anchor_heads, open_sink

    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY)
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U2", "U3"), required_approvals=2))
    for actor in ("U2", "U9", "U3"):
        decide(store, request["id"], actor=actor, vote="approve", channel="cli", now=utcnow())
    assert anchor_heads(store.audit_log, open_sink(get_settings().resolved_audit_anchors)) is not None
    new_key = tmp_path / "new.key"
    new_key.write_text("the-rotated-audit-key")

    assert cli(["audit", "rekey", "--new-key-file", str(new_key)]) == 0
    assert "re-keyed" in capsys.readouterr().out
    assert cli(["audit", "verify"]) == 1  # this process still holds the old key: nothing verifies under it
    capsys.readouterr()
    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY="the-rotated-audit-key")
    assert cli(["audit", "verify"]) == 0
    assert "checked against 1 anchors" in capsys.readouterr().out  # the new key's anchor; the old one is retired
    _truncate_with_head(open_store(get_settings().resolved_database_url, get_settings()), request["id"])
    assert cli(["audit", "verify"]) == 1
    assert "was truncated: the anchor of" in capsys.readouterr().err
    # A log that does not verify is not re-keyed (that would bless the damage with the new key).
    assert cli(["audit", "rekey", "--new-key-file", str(new_key)]) == 1
    assert "does not verify under the current key" in capsys.readouterr().err


def test_anchors_in_an_object_locked_bucket_catch_a_truncation(
    env: Any, postgres_url: str, aws_env: Any, capsys: Any
) -> None:
    """Anchors as docker compose keeps them: one object each in a bucket with Object Lock (compliance mode)."""
    from runtime_ops_tests.support import servers

    s3 = aws_env.client("s3")
    bucket = servers.unique_name("audit", sep="-")
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    s3.put_object_lock_configuration(
        Bucket=bucket,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}},
        },
    )
    env(
        database_url=postgres_url,
        RUNTIME_OPS_AUDIT_KEY=KEY,
        RUNTIME_OPS_AUDIT_ANCHORS=f"s3://{bucket}/anchors",
        AWS_ENDPOINT_URL=aws_env.endpoint_url,
    )
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U2", "U3"), required_approvals=2))
    for actor in ("U2", "U9", "U3"):
        decide(store, request["id"], actor=actor, vote="approve", channel="cli", now=utcnow())
    assert cli(["audit", "anchor"]) == 0
    assert f"in s3://{bucket}/anchors" in capsys.readouterr().out
    [anchor] = s3.list_objects_v2(Bucket=bucket, Prefix="anchors/")["Contents"]
    versions = s3.list_object_versions(Bucket=bucket, Prefix=anchor["Key"])["Versions"]
    with pytest.raises(Exception, match="AccessDenied"):  # not even the bucket's owner removes it before retention ends
        s3.delete_object(Bucket=bucket, Key=anchor["Key"], VersionId=versions[0]["VersionId"])
    assert cli(["audit", "verify"]) == 0
    assert "checked against 1 anchors" in capsys.readouterr().out
    _truncate_with_head(store, request["id"])
    assert cli(["audit", "verify"]) == 1
    assert "was truncated: the anchor of" in capsys.readouterr().err
