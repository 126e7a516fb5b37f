"""Locks with fencing tokens on a real redis-server, and the state-store lock on real PostgreSQL and SQLite.

The semantic tests run against all three backends; the failure tests (Redis stopped or frozen, a paused
holder fenced out by the store) use the real servers from conftest.
"""

from __future__ import annotations

import itertools
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, update

from runtime_ops.locks import Lease, LockerBase, LockLost, LockTimeout, LockUnavailable, open_locker
from runtime_ops.locks.base import holder_of, new_token
from runtime_ops.locks.redis_lock import KEY_PREFIX, RedisLocker
from runtime_ops.locks.store_lock import StoreLocker, locks
from runtime_ops.settings import get_settings
from runtime_ops.store import AliasConflict, StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support import servers

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Backend:
    kind: str
    make: Callable[[], LockerBase]  # a new locker with its own client / connection pool
    expire: Callable[[str], object]  # make the current lease of a lock expire now (as if its TTL had passed)
    made: list[LockerBase] = field(default_factory=list)

    def locker(self) -> LockerBase:
        locker = self.make()
        self.made.append(locker)
        return locker


def _store_backend(kind: str, url: str) -> Backend:
    store = open_store(url, get_settings())

    def expire(name: str) -> None:
        with store.tx() as conn:
            conn.execute(update(locks).where(locks.c.name == name).values(expires_at_ms=0))

    return Backend(kind, lambda: StoreLocker(open_store(url, get_settings())), expire)


@pytest.fixture(params=["redis", "postgres", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        import redis

        admin = redis.Redis.from_url(url)
        b = Backend("redis", lambda: RedisLocker(url), lambda name: admin.delete(KEY_PREFIX + name) and None)
        yield b
        admin.close()
    elif request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        b = _store_backend("postgres", url)
        yield b
        open_store(url, get_settings(), migrate=False).engine.dispose()  # before the database is dropped
    else:
        yield (b := _store_backend("sqlite", f"sqlite:///{tmp_path / 'state.db'}"))
    for locker in b.made:
        locker.close()


@pytest.fixture
def alias_store(postgres_url: str) -> Iterator[StateStore]:
    """A real StateStore on PostgreSQL: the protected store whose alias writes carry fences."""
    store = open_store(postgres_url, get_settings())
    yield store
    store.engine.dispose()


def _history(store: StateStore, name: str) -> list[tuple[int | None, int | None, str]]:
    with store.tx() as conn:
        rows = conn.execute(
            select(t.alias_history.c.old_target, t.alias_history.c.new_target, t.alias_history.c.actor)
            .where(t.alias_history.c.name == name)
            .order_by(t.alias_history.c.id)
        )
        return [tuple(r) for r in rows]


# ---------------------------------------------------------------------------------------------- semantics


def test_mutual_exclusion_across_threads(backend: Backend) -> None:
    inside, entries, overlaps = [0], [], []
    guard = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        locker = backend.locker()
        try:
            for _ in range(5):
                with locker.hold("exclusive", ttl_ms=5000, wait_s=20, renew=False) as lease:
                    with guard:
                        inside[0] += 1
                        overlaps.append(inside[0])
                        entries.append(lease.fence)
                    time.sleep(0.005)
                    with guard:
                        inside[0] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors
    assert len(entries) == 20
    assert max(overlaps) == 1, "two holders were inside the critical section at once"
    # Entries were serialised by the lock, so the fences they carried increase in entry order.
    assert entries == sorted(entries) and len(set(entries)) == 20


def test_bounded_wait_raises_lock_timeout_naming_lock_holder_and_wait(backend: Backend) -> None:
    a, b = backend.locker(), backend.locker()
    lease = a.acquire("promotion", ttl_ms=10_000, wait_s=0)
    t0 = time.monotonic()
    with pytest.raises(LockTimeout) as info:
        b.acquire("promotion", ttl_ms=10_000, wait_s=0.4)
    waited = time.monotonic() - t0
    assert 0.4 <= waited < 1.5, waited
    message = str(info.value)
    assert "'promotion'" in message and "0.4s" in message
    assert lease.holder is not None and f"held by {lease.holder}" in message
    assert "ms left on its lease" in message
    assert (
        info.value.holder == lease.holder
        and info.value.remaining_ms is not None
        and 8000 < info.value.remaining_ms <= 10_000
    )
    assert a.release(lease)


def test_release_and_extend_by_a_non_holder_are_refused(backend: Backend) -> None:
    a, b = backend.locker(), backend.locker()
    lease = a.acquire("promotion", ttl_ms=10_000, wait_s=0)
    forged = Lease(lease.name, new_token(), lease.fence, lease.ttl_ms, time.monotonic())
    assert b.release(forged) is False
    assert b.extend(forged, 60_000) is False
    with pytest.raises(LockTimeout):
        b.acquire("promotion", ttl_ms=1000, wait_s=0)  # still held by `lease`
    assert a.release(lease) is True
    assert a.release(lease) is False  # released already
    assert b.release(b.acquire("promotion", ttl_ms=1000, wait_s=0)) is True


def test_ttl_expiry_lets_the_next_holder_in_with_a_higher_fence(backend: Backend) -> None:
    a, b = backend.locker(), backend.locker()
    first = a.acquire("promotion", ttl_ms=300, wait_s=0)  # never released: its holder "crashed"
    t0 = time.monotonic()
    second = b.acquire("promotion", ttl_ms=5000, wait_s=3)
    waited = time.monotonic() - t0
    assert 0.15 <= waited < 1.5, waited  # it waited for the TTL, not for the whole bounded wait
    assert second.fence > first.fence
    assert a.extend(first) is False and a.release(first) is False  # the expired lease cannot come back
    assert b.release(second) is True


def test_extend_keeps_a_lease_alive_past_its_ttl(backend: Backend) -> None:
    a, b = backend.locker(), backend.locker()
    lease = a.acquire("promotion", ttl_ms=400, wait_s=0)
    t0 = time.monotonic()
    for _ in range(6):
        time.sleep(0.15)
        assert a.extend(lease, 400) is True
    assert time.monotonic() - t0 > 0.8  # twice the TTL
    assert lease.renewed_at is not None and lease.remaining_s() > 0
    with pytest.raises(LockTimeout):
        b.acquire("promotion", ttl_ms=400, wait_s=0)
    assert a.release(lease) is True


def test_hold_renews_in_the_background_and_releases_on_exit(backend: Backend) -> None:
    a, b = backend.locker(), backend.locker()
    with a.hold("promotion", ttl_ms=300, wait_s=0) as lease:
        time.sleep(1.0)  # more than three TTLs
        with pytest.raises(LockTimeout):
            b.acquire("promotion", ttl_ms=300, wait_s=0)
        lease.check()
    assert not lease.lease_lost and lease.renewed_at is not None
    after = b.acquire("promotion", ttl_ms=300, wait_s=0)  # released on exit, not by expiry
    assert after.fence > lease.fence
    b.release(after)

    with pytest.raises(ValueError, match="boom"), a.hold("promotion", ttl_ms=5000, wait_s=0):
        raise ValueError("boom")  # the body's error propagates, and the lock is still released
    b.release(b.acquire("promotion", ttl_ms=300, wait_s=0))


def test_failed_renewal_is_recorded_and_raises_lock_lost_at_exit(backend: Backend) -> None:
    a, b = backend.locker(), backend.locker()
    with pytest.raises(LockLost, match="lost while held"), a.hold("promotion", ttl_ms=300, wait_s=0) as lease:
        backend.expire("promotion")  # the lease ends under us (e.g. a pause longer than the TTL)
        taker = b.acquire("promotion", ttl_ms=10_000, wait_s=0)
        deadline = time.monotonic() + 2
        while not lease.lease_lost and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lease.lease_lost and "refused" in (lease.lost or "")
        with pytest.raises(LockLost):
            lease.check()
    # pytest.raises suppresses only the LockLost raised at the hold's exit: taker is bound
    assert taker.fence > lease.fence  # pyright: ignore[reportPossiblyUnboundVariable]
    assert b.release(taker) is True  # pyright: ignore[reportPossiblyUnboundVariable]  # the old holder's exit did not release the new holder's lock


def test_fences_strictly_increase_across_acquisitions(backend: Backend) -> None:
    lockers = [backend.locker(), backend.locker()]
    fences = []
    for i in range(10):
        lease = lockers[i % 2].acquire("promotion", ttl_ms=5000, wait_s=1)
        fences.append(lease.fence)
        assert lockers[i % 2].release(lease)
    assert all(x < y for x, y in itertools.pairwise(fences)), fences
    assert lockers[0].fence_of("promotion") == fences[-1]  # type: ignore[attr-defined]
    other = lockers[0].acquire("another-lock", ttl_ms=5000, wait_s=0)  # fences are per lock, still fresh
    assert lockers[0].release(other)


def test_stale_holders_fenced_write_is_rejected_after_a_newer_holder_wrote(
    backend: Backend, alias_store: StateStore
) -> None:
    a, b = backend.locker(), backend.locker()
    old = a.acquire("promotion", ttl_ms=300, wait_s=0)
    # `a` stalls past its TTL; `b` takes the lock and promotes model 2.
    new = b.acquire("promotion", ttl_ms=5000, wait_s=3)
    assert new.fence > old.fence
    alias_store.registry.set_alias("production", 2, actor="new-holder", fence=new.fence)
    # `a` wakes up and does the write it was about to do, with its old token: the store refuses it.
    with pytest.raises(AliasConflict, match="older than"):
        alias_store.registry.set_alias("production", 1, actor="stale-holder", fence=old.fence)
    assert alias_store.registry.alias("production") == 2
    assert _history(alias_store, "production") == [(None, 2, "new-holder")]
    assert b.release(new)


# ---------------------------------------------------------------------------------------------- failures


def test_redis_stopped_fails_closed_with_lock_unavailable(redis_server: servers.RedisServer, redis_url: str) -> None:
    locker = RedisLocker(redis_url)
    try:
        before = locker.acquire("promotion", ttl_ms=5000, wait_s=0)  # a pooled connection exists now
        redis_server.stop()
        ran = []
        t0 = time.monotonic()
        with pytest.raises(LockUnavailable) as info, locker.hold("promotion", ttl_ms=5000, wait_s=5):
            ran.append(True)
        assert not ran, "protected work ran without the lock"
        assert time.monotonic() - t0 < 3
        message = str(info.value)
        assert f"REDIS_URL={redis_url}" in message and "unreachable" in message
        assert "Connection" in message  # the underlying error is named
        with pytest.raises(LockUnavailable):
            locker.release(before)
    finally:
        redis_server.start()
    # Back up, empty (no persistence): the same locker reconnects, and the fence counter - lost with the data -
    # restarts from the server clock, above every fence issued before, instead of at 1.
    after = locker.acquire("promotion", ttl_ms=5000, wait_s=0)
    assert after.fence > before.fence
    locker.release(after)
    locker.close()


def test_redis_frozen_fails_closed_within_the_socket_timeout(redis_server: servers.RedisServer, redis_url: str) -> None:
    locker = RedisLocker(redis_url, socket_timeout=0.5, connect_timeout=0.5)
    try:
        locker.release(locker.acquire("promotion", ttl_ms=5000, wait_s=0))
        redis_server.pause()
        t0 = time.monotonic()
        with pytest.raises(LockUnavailable, match=r"REDIS_URL=.*Timeout"):
            locker.acquire("promotion", ttl_ms=5000, wait_s=5)
        assert time.monotonic() - t0 < 2  # one socket timeout, not retried, not the whole bounded wait
    finally:
        redis_server.resume()
        locker.close()


def test_state_store_unreachable_fails_closed_naming_the_database_url() -> None:
    url = f"postgresql://postgres:secret@127.0.0.1:{servers.free_port()}/nowhere"
    engine = create_engine(url, connect_args={"connect_timeout": 2})
    locker = StoreLocker(StateStore(engine, get_settings()))
    try:
        with pytest.raises(LockUnavailable) as info:
            locker.acquire("promotion", ttl_ms=1000, wait_s=1)
        message = str(info.value)
        assert "RUNTIME_OPS_DATABASE_URL=postgresql://postgres:[REDACTED]@127.0.0.1" in message
        assert "secret" not in message
    finally:
        engine.dispose()


def test_redis_acquire_is_idempotent_for_the_same_token(redis_url: str) -> None:
    """A retried acquire whose first reply was lost must not wait for itself (redis-py retries once)."""
    locker = RedisLocker(redis_url)
    token = new_token()
    fence = locker._try_acquire("promotion", token, 5000)
    assert isinstance(fence, int)
    assert locker._try_acquire("promotion", token, 5000) == fence
    held = locker._try_acquire("promotion", new_token(), 5000)
    assert not isinstance(held, int) and held.holder_token == token
    assert holder_of(token) == f"{socket.gethostname()[:64]}:{os.getpid()}"
    locker.close()


def test_open_locker_uses_redis_when_redis_url_is_set_else_the_state_store(env, redis_url: str) -> None:
    from runtime_ops.settings import get_settings

    env(REDIS_URL=redis_url)
    locker = open_locker(get_settings())
    assert isinstance(locker, RedisLocker) and locker.url == redis_url
    locker.close()
    home = env()
    locker = open_locker(get_settings())
    assert isinstance(locker, StoreLocker) and locker.store.dialect == "sqlite"
    assert str(home) in str(locker.store.engine.url)
    locker.release(locker.acquire("promotion", ttl_ms=1000, wait_s=0))


def test_locks_table_matches_its_migration(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    assert t.metadata.tables["locks"] is locks
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings())
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "locks" in repr(d)] == []


# ---------------------------------------------------------------------------------------------- the paused holder

_PAUSED_HOLDER = r"""
import json, sys, time
from runtime_ops.locks import LockLost, RedisLocker
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store import AliasConflict

redis_url, db_url, ttl_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(db_url, get_settings(), migrate=False)
out = {}
try:
    with RedisLocker(redis_url).hold("promotion", ttl_ms=ttl_ms, wait_s=5) as lease:
        out["fence"] = lease.fence
        print(json.dumps({"event": "acquired", "fence": lease.fence}), flush=True)
        sys.stdin.readline()  # about to write: the parent freezes us here, past our TTL
        out["resumed_at"] = time.time()
        try:
            store.registry.set_alias("production", 1, actor="paused-holder", fence=lease.fence)
            out["write"] = "accepted"
        except AliasConflict as exc:
            out["write"] = "rejected: " + str(exc)
except LockLost as exc:
    out["lock_lost"] = str(exc)
print(json.dumps({"event": "done", **out}), flush=True)
"""


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            proc.kill()
            raise AssertionError(f"no output from the holder process within {timeout}s")
    return proc.stdout.readline()


def test_sigstopped_holder_is_fenced_out_after_its_ttl(
    redis_url: str, alias_store: StateStore, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ttl_ms = 1000
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_HOLDER, redis_url, postgres_url, str(ttl_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    try:
        line = _readline(proc, 30)
        assert line, f"holder process died: {proc.stderr.read() if proc.stderr else ''}"
        old_fence = json.loads(line)["fence"]
        t_acquired = time.monotonic()
        time.sleep(0.5)  # let its renewal thread extend the lease at least once: it is a live, renewed holder
        os.kill(proc.pid, signal.SIGSTOP)
        t_stopped = time.monotonic()

        newer = RedisLocker(redis_url)
        with pytest.raises(LockTimeout):  # still held right after the pause: the TTL has not passed
            newer.acquire("promotion", ttl_ms=5000, wait_s=0)
        lease = newer.acquire("promotion", ttl_ms=5000, wait_s=5)
        t_taken = time.monotonic()
        assert lease.fence > old_fence
        alias_store.registry.set_alias("production", 2, actor="new-holder", fence=lease.fence)

        os.kill(proc.pid, signal.SIGCONT)
        t_resumed = time.monotonic()
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=30)
        t_done = time.monotonic()
        assert proc.returncode == 0, err
        done = json.loads(out.strip().splitlines()[-1])
        assert done["fence"] == old_fence
        assert done["write"].startswith("rejected") and "older than" in done["write"], done
        assert "lost while held" in done.get("lock_lost", ""), done  # and its hold() reported the loss
        assert newer.release(lease) is True  # the resumed holder did not release the new holder's lock
        newer.close()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()

    # Exactly one write took effect: the newer holder's.
    assert alias_store.registry.alias("production") == 2
    assert _history(alias_store, "production") == [(None, 2, "new-holder")]
    with alias_store.tx() as conn:
        assert conn.execute(select(t.aliases.c.fence).where(t.aliases.c.name == "production")).scalar() == lease.fence
    with capsys.disabled():
        print(
            f"\n[paused holder] ttl={ttl_ms} ms, old fence {old_fence}, new fence {lease.fence}: "
            f"paused {(t_stopped - t_acquired) * 1000:.0f} ms after acquiring; the newer holder got the lock "
            f"{(t_taken - t_stopped) * 1000:.0f} ms into the pause; resumed after "
            f"{(t_resumed - t_stopped) * 1000:.0f} ms paused; its stale write was rejected "
            f"{(t_done - t_resumed) * 1000:.0f} ms after resuming"
        )
