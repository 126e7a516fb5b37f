"""An audit a database admin cannot wipe (real PostgreSQL): `runtime-ops audit verify` checks the state the log
audits for its records, so a log emptied or cut short together with its heads is named even without anchors;
missing, empty or unreadable anchors fail unless `--no-anchors`; verify never makes a key and names a wrong one
by key id; every mistake of `runtime-ops audit …` is one line."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, text, update

from runtime_ops.cli import main as cli
from runtime_ops.decisions.decide import decide
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import SettingsError, get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.chain import GENESIS, GLOBAL_CHAIN, key_id
from runtime_ops.store.engine import utcnow
from runtime_ops_tests.support.approvals_support import open_pending

KEY = "audit-key-kept-outside-the-database"
TWO = RequestPolicy(approvers=("U2", "U3"), required_approvals=2)


def _history(store: StateStore) -> dict[str, Any]:
    """A request with a counted vote, a refused attempt and a decision (five records in its chain)."""
    request = open_pending(store, TWO)
    for actor in ("U2", "U9", "U3"):
        decide(store, request["id"], actor=actor, vote="approve", channel="cli", now=utcnow())
    return request


def _wipe(store: StateStore) -> None:
    """What an admin without the key can do: delete every record and move every head back to the start."""
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_log"))
        conn.execute(text("UPDATE approval_requests SET audit_seq = 0, audit_hash = :g"), {"g": GENESIS})
        conn.execute(text("UPDATE audit_head SET last_id = 0, last_hash = :g"), {"g": GENESIS})


def _cut(store: StateStore, chain: str, n: int = 1) -> list[dict[str, Any]]:
    """Delete the last `n` records of `chain` and move its head back with them; returns what was cut."""
    log = t.audit_log
    with store.engine.begin() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(log).where(log.c.chain == chain).order_by(log.c.seq))]
        cut, kept = rows[-n:], rows[:-n]
        conn.execute(log.delete().where(log.c.id.in_([r["id"] for r in cut])))
        _set_head(conn, chain, (kept[-1]["seq"], kept[-1]["hash"]) if kept else (0, GENESIS))
    return cut


def _restore(store: StateStore, chain: str, cut: list[dict[str, Any]]) -> None:
    with store.engine.begin() as conn:
        conn.execute(insert(t.audit_log), cut)
        _set_head(conn, chain, (cut[-1]["seq"], cut[-1]["hash"]))


def _set_head(conn: Any, chain: str, head: tuple[int, str]) -> None:
    if chain == GLOBAL_CHAIN:
        conn.execute(update(t.audit_head).values(last_id=head[0], last_hash=head[1]))
    else:
        r = t.approval_requests
        conn.execute(update(r).where(r.c.id == chain).values(audit_seq=head[0], audit_hash=head[1]))


def _verify(capsys: Any, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli(["audit", "verify", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_emptied_log_is_named_by_the_requests_it_lost(env: Any, postgres_url: str, capsys: Any) -> None:
    home = env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY)
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = _history(store)
    assert cli(["audit", "anchor"]) == 0
    assert _verify(capsys)[0] == 0

    _wipe(store)
    (home / "audit_anchors.jsonl").unlink()
    for args in ((), ("--no-anchors",)):
        code, out, err = _verify(capsys, *args)
        assert code == 1 and not out, (args, out)
        assert f"approval request {request['id']} was opened at" in err, err
        assert "no request_opened record" in err and "the audit log lost records" in err, err
        assert err.count("\n") == 1 and "None" not in err, err


# Each kind of state that cannot exist without its record: how to make it on a request of its own pipeline
# (opening requests supersedes the pipeline's pending ones), the chain whose end holds that record, and what
# verify must say once that end is cut together with the head.
def _decided(store: StateStore, rid: str) -> tuple[str, str]:
    for actor in ("U2", "U3"):
        decide(store, rid, actor=actor, vote="approve", channel="cli", now=utcnow())
    # The decision's last record is its candidate's lifecycle move (written in the same transaction).
    return rid, f"the candidate of {rid} is approved but its audit chain has no lifecycle record"


def _vote(store: StateStore, rid: str) -> tuple[str, str]:
    decide(store, rid, actor="U2", vote="approve", channel="slack", now=utcnow())  # 1 of 2: counted, not decided
    return rid, f"the approve vote of U2 on {rid} has no attempt record"


def _superseded(store: StateStore, rid: str) -> tuple[str, str]:
    open_pending(store, TWO, seed=f"{store.pipeline}-next")
    return rid, f"the candidate of {rid} is superseded but its audit chain has no lifecycle record"


def _expired(store: StateStore, rid: str) -> tuple[str, str]:
    assert store.deadlines.expire_due(utcnow() + timedelta(days=2)) == [rid]
    return rid, f"the candidate of {rid} is expired but its audit chain has no lifecycle record"


def _compensated(store: StateStore, rid: str) -> tuple[str, str]:
    from runtime_ops.approvals.deadlines import COMPENSATIONS

    store.deadlines.expire_due(utcnow() + timedelta(days=2))
    assert store.deadlines.compensate_due(COMPENSATIONS, utcnow()) == [(rid, "done")]
    return rid, "was compensated but its audit chain has no compensated record"


def _notified(store: StateStore, rid: str) -> tuple[str, str]:
    assert store.notifications.mark_notified(rid, now=utcnow(), channel="slack", slack_ts="1.2")
    return rid, "was announced but its audit chain has no notified record"


def _escalated(store: StateStore, rid: str) -> tuple[str, str]:
    assert store.deadlines.escalate_due(utcnow() + timedelta(hours=2)) == [rid]
    return rid, "was escalated but its audit chain has no escalated record"


def _escalation_notified(store: StateStore, rid: str) -> tuple[str, str]:
    store.deadlines.escalate_due(utcnow() + timedelta(hours=2))
    store.notifications.mark_escalation_notified(rid, now=utcnow(), channel="slack")
    return rid, "had its escalation announced but its audit chain has no escalation_notified record"


def _link(store: StateStore, rid: str) -> tuple[str, str]:
    decide(store, rid, actor="U2", vote="approve", channel="cli", now=utcnow())
    decide(store, rid, actor="U3", vote="reject", channel="cli", reason="no", now=utcnow())  # decided: rejected
    decide(store, rid, actor="U2", vote="approve", channel="link", now=utcnow(), link_nonce="nonce-1")
    return rid, f"the approval link U2 used on {rid} at"


def _delivery(store: StateStore, rid: str) -> tuple[str, str]:
    decide(store, "apr-unknown", actor="U2", vote="approve", channel="slack", now=utcnow(), dedupe_key="1.2:3.4:U2")
    return GLOBAL_CHAIN, "the Slack click on apr-unknown answered unknown_request at"


def _promoted(store: StateStore, rid: str) -> tuple[str, str]:
    """As the promotion saga leaves it (models/promotion.py): the announce step appended, then journaled."""
    decide(store, rid, actor="U2", vote="approve", channel="cli", now=utcnow())
    decide(store, rid, actor="U3", vote="approve", channel="cli", now=utcnow())
    store.audit_log.append(event="promoted", request_id=rid, actor="U2, U3", channel="dagster", outcome="done")
    steps = [{"name": n, "status": "done", "data": {}} for n in ("move_production_alias", "announce")]
    store.sagas.save_saga(f"promote-{rid}", kind="promotion", status="done", steps=steps, error=None, owner=None)
    return rid, f"the promotion saga of {rid} announced its promotion but its audit chain has no promoted record"


KINDS: dict[str, Callable[[StateStore, str], tuple[str, str]]] = {
    "decided": _decided,
    "vote": _vote,
    "superseded": _superseded,
    "expired": _expired,
    "compensated": _compensated,
    "notified": _notified,
    "escalated": _escalated,
    "escalation_notified": _escalation_notified,
    "link": _link,
    "delivery": _delivery,
    "promoted": _promoted,
}
DEADLINES = RequestPolicy(
    approvers=("U2", "U3"),
    escalation_approvers=("U5",),
    required_approvals=2,
    escalate_after=timedelta(hours=1),
    expire_after=timedelta(days=1),
)


def test_a_log_cut_short_with_its_heads_is_named_by_each_kind_of_state(
    env: Any, postgres_url: str, capsys: Any
) -> None:
    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY)
    root = open_store(get_settings().resolved_database_url, get_settings())
    made = {}
    for kind, make in KINDS.items():
        store = root.scoped(f"p-{kind}")
        made[kind] = make(store, open_pending(store, DEADLINES, seed=kind)["id"])
    assert _verify(capsys, "--no-anchors")[0] == 0

    for kind, (chain, named) in made.items():
        cut = _cut(root, chain)
        code, out, err = _verify(capsys, "--no-anchors")
        assert code == 1 and named in err and "the audit log lost records" in err, (kind, out, err)
        assert err.count("\n") == 1 and "None" not in err, (kind, err)
        _restore(root, chain, cut)
        assert _verify(capsys, "--no-anchors")[0] == 0, kind


def _truncated(env: Any, postgres_url: str, **extra: str) -> tuple[Path, StateStore]:
    """An anchored log whose newest record (a refused attempt, which no state row stands for) was cut together with
    its head: only the anchors can tell."""
    home = env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY, **extra)
    store = open_store(get_settings().resolved_database_url, get_settings())
    request = _history(store)
    decide(store, request["id"], actor="U9", vote="reject", channel="cli", reason="late", now=utcnow())
    assert cli(["audit", "anchor"]) == 0
    _cut(store, request["id"])
    return home, store


@pytest.mark.parametrize("loss", ["deleted", "emptied", "elsewhere", "garbled"])
def test_missing_empty_or_unreadable_anchors_fail_unless_told_no_anchors(
    env: Any, postgres_url: str, tmp_path: Path, capsys: Any, loss: str
) -> None:
    home, _ = _truncated(env, postgres_url)
    anchors = home / "audit_anchors.jsonl"
    code, _, err = _verify(capsys)
    assert code == 1 and "was truncated: the anchor of" in err, err  # with its anchors the cut is named
    assert "None" not in err, err

    if loss == "deleted":
        anchors.unlink()
    elif loss == "emptied":
        anchors.write_text("")
    elif loss == "elsewhere":
        env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY, RUNTIME_OPS_AUDIT_ANCHORS=str(tmp_path / "nowhere"))
    else:
        anchors.write_text('{"at": "2026-12-05T10:00:00+00:00", "heads": {"apr-1": [1]}}\nnot json\n')
    code, out, err = _verify(capsys)
    assert code == 1 and not out, out
    assert err.startswith("audit log NOT VERIFIED: ") and "--no-anchors" in err, err
    assert err.count("\n") == 1 and "None" not in err, err

    code, out, _ = _verify(capsys, "--no-anchors")  # told to, it checks what it can without them
    assert code == 0 and "anchors not checked (--no-anchors)" in out, out


def test_verify_without_its_key_refuses_and_never_writes_one(env: Any, postgres_url: str, capsys: Any) -> None:
    home = env(database_url=postgres_url)  # the embedded key: made in the home with the store, by nothing else
    store = open_store(get_settings().resolved_database_url, get_settings())
    key_file = home / "audit_key"
    made = key_file.read_text().strip()
    _history(store)
    assert cli(["audit", "anchor"]) == 0 and _verify(capsys)[0] == 0

    key_file.unlink()
    get_settings.cache_clear()
    for command in (["verify"], ["verify", "--no-anchors"], ["anchor"]):
        capsys.readouterr()
        assert cli(["audit", *command]) == 2, command
        out, err = capsys.readouterr()
        assert not out and err.startswith("error: no audit key: RUNTIME_OPS_AUDIT_KEY is unset"), err
        assert f"key id {key_id(made.encode())}" in err and err.count("\n") == 1, err
        assert not key_file.exists(), command
    writer = open_store(get_settings().resolved_database_url, get_settings())
    with pytest.raises(SettingsError, match="no audit key"):  # a writer refuses too, rather than chain anew
        decide(writer, "apr-x", actor="U2", vote="approve", channel="cli", now=utcnow())
    assert not key_file.exists()


def test_a_wrong_key_is_named_by_its_key_id(env: Any, postgres_url: str, capsys: Any) -> None:
    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY)
    _history(open_store(get_settings().resolved_database_url, get_settings()))
    assert cli(["audit", "anchor"]) == 0
    right, wrong = key_id(KEY.encode()), key_id(b"some other key")

    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY="some other key")
    code, _, err = _verify(capsys)  # the anchors name the key they were taken under
    assert code == 1 and err.startswith("audit log NOT VERIFIED: wrong audit key"), err
    assert f"key id {wrong}" in err and "the newest anchor (of " in err and f"key id {right}" in err, err
    code, _, err = _verify(capsys, "--no-anchors")  # and so does every record
    assert code == 1 and "wrong audit key" in err and f"key id {wrong}" in err and f"key id {right}" in err, err
    assert "forged" not in err and err.count("\n") == 1, err


def test_audit_command_mistakes_are_one_line_with_status_2(
    env: Any, postgres_url: str, tmp_path: Path, capsys: Any
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env(database_url=postgres_url, RUNTIME_OPS_AUDIT_KEY=KEY, RUNTIME_OPS_AUDIT_ANCHORS=str(blocker / "anchors.jsonl"))
    _history(open_store(get_settings().resolved_database_url, get_settings()))
    empty = tmp_path / "empty.key"
    empty.write_text("\n")
    for command, says in (
        (["anchor"], f"error: cannot read the anchors in {blocker / 'anchors.jsonl'}: Not a directory"),
        (["show", "apr-nope"], "error: no audit records for apr-nope"),
        (["rekey", "--new-key-file", str(empty)], f"error: --new-key-file {empty} is empty"),
    ):
        capsys.readouterr()
        assert cli(["audit", *command]) == 2, command
        out, err = capsys.readouterr()
        assert not out and err.startswith(says) and err.count("\n") == 1, (command, err)
        assert "Traceback" not in err and "None" not in err, (command, err)
