"""The idempotency ledger on a real PostgreSQL: each side effect runs once per key; a dead owner's effect is
taken over knowingly; finished effects are skipped with their result."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from runtime_ops.approvals.announce import Announcer
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store.engine import utcnow
from runtime_ops_tests.support.approvals_support import open_pending


def test_claims(postgres_url: str) -> None:
    store = open_store(postgres_url, get_settings())
    now = utcnow()
    with ThreadPoolExecutor(8) as pool:
        claims = list(pool.map(lambda i: store.effects.claim_effect("k1", "test", f"w{i}", now=now), range(8)))
    assert sorted(c.action for c in claims) == ["busy"] * 7 + ["run"]  # one owner runs it
    store.effects.finish_effect("k1", {"ts": "1.2"})
    assert store.effects.claim_effect("k1", "test", "w9").action == "skip"
    assert store.effects.claim_effect("k1", "test", "w9").result == {"ts": "1.2"}

    assert store.effects.claim_effect("k2", "test", "w1", now=now).action == "run"
    store.effects.fail_effect("k2", "boom")
    retry = store.effects.claim_effect("k2", "test", "w2", now=now)
    assert (retry.action, retry.attempts) == ("run", 2)

    assert store.effects.claim_effect("k3", "test", "dead", now=now - timedelta(hours=1)).action == "run"
    taken = store.effects.claim_effect("k3", "test", "alive", now=now, stale_after=timedelta(minutes=10))
    assert (taken.action, taken.attempts) == ("takeover", 2)
    assert store.effects.effect("k3")["owner"] == "alive"


def test_an_interrupted_announcement_is_resent_knowingly_once(postgres_url: str) -> None:
    store = open_store(postgres_url, get_settings())
    request = open_pending(store, RequestPolicy(approvers=("U1",)))
    lines: list[str] = []
    announcer = Announcer(store, "secret", "http://ops", "http://dagster", None, emit=lines.append)
    now = utcnow()
    # A previous sensor tick claimed the announcement, then died before recording it.
    assert store.effects.claim_effect(f"notify:{request['id']}", "notify", "dead-tick", now=now).action == "run"
    announcer.tick(now + timedelta(seconds=30))
    assert lines == []  # the owner may still be alive: nothing is posted twice
    announcer.tick(now + timedelta(minutes=5))
    assert len(lines) == 1 and "sent again" in lines[0] and "/approvals/" in lines[0]
    announcer.tick(now + timedelta(minutes=10))
    assert len(lines) == 1
    notified = [r for r in store.audit_log.records(request["id"]) if r["event"] == "notified"]
    assert len(notified) == 1 and notified[0]["detail"]["resent"] is True
