"""Lock acquire+release throughput: ours (`RedisLocker`) against the raw round trips it needs and redis-py's `Lock`.

One client, one thread, loopback, against a throwaway redis-server started here (no persistence). Each variant
runs ITERATIONS acquire+release pairs, interleaved with the others in ROUNDS chunks (rotating the order), so
drift on a shared machine hits every variant alike:

- floor: the round trips our acquire+release needs and nothing else - two EVALSHA calls of a trivial script
  (`return 1`) with the same number of keys and arguments as our acquire and release scripts, through the same
  redis-py client. This is the cost of two request/reply exchanges plus redis-py's command encoding and reply
  parsing; the server does no work. (Two PINGs per pair are also timed, for context.)
- ours: `RedisLocker.acquire(name, ttl_ms=30000, wait_s=0)` then `release(lease)`: one EVALSHA each (SET NX PX +
  INCR of the fence counter in the acquire script; compare token + DEL in the release script).
- redis-py Lock + INCR: `client.lock(name, timeout=30).acquire()`, `client.incr(fence_key)`, `lock.release()`,
  what one writes to get a fencing token with redis-py: three round trips.
- redis-py Lock alone (informational: no fencing token, so not a substitute): SET NX PX + EVALSHA release.

Also, informational: `StoreLocker` acquire+release on SQLite against two bare write transactions (each one
single-row UPDATE) through the same engine, the floor of two transactions per pair.
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.common import BenchResult, Target, benchmark

ITERATIONS = 5000  # per variant
ROUNDS = 5  # chunks of ITERATIONS / ROUNDS, interleaved across variants
WARMUP = 200  # per variant, not measured
MAX_SECONDS = 30.0  # per variant: a round stops early past its share of this
SQLITE_ITERATIONS = 2000
SQLITE_MAX_SECONDS = 15.0
FLOOR_TARGET = 0.8
REDIS_PY_TARGET = 1.0

NAME = "bench"
TRIVIAL_LUA = "return 1"


def _timed(fn: Callable[[], None], n: int, budget: float) -> tuple[int, float]:
    """Run fn up to n times, stopping once `budget` seconds have passed; (iterations done, seconds)."""
    done = 0
    t0 = time.perf_counter()
    deadline = t0 + budget
    while done < n:
        fn()
        done += 1
        if not done % 50 and time.perf_counter() > deadline:
            break
    return done, time.perf_counter() - t0


def _commands_per_pair(client: Any, fn: Callable[[], None], n: int = 100) -> dict[str, Any]:
    """What one pair costs, over `n` pairs: the commands the client sent (each one a round trip) and the
    commands the server ran (INFO commandstats, counting those run inside scripts)."""
    sent: list[str] = []
    execute = client.execute_command

    def counting(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]).lower())
        return execute(*args, **options)

    fn()  # scripts loaded, connection open: count the steady state
    client.config_resetstat()
    client.execute_command = counting  # instance attribute: redis-py's commands and scripts all go through it
    try:
        for _ in range(n):
            fn()
    finally:
        del client.execute_command
    stats = client.info("commandstats")
    skip = ("cmdstat_config|resetstat", "cmdstat_info", "cmdstat_script|load", "cmdstat_time")
    return {
        "round_trips": len(sent) / n,
        "sent": {c: sent.count(c) / n for c in sorted(set(sent))},
        "server_ran": {k.removeprefix("cmdstat_"): round(v["calls"] / n, 2) for k, v in stats.items() if k not in skip},
    }


def _redis_variants(locker: Any) -> dict[str, Callable[[], None]]:
    from runtime_ops.locks.redis_lock import FENCE_PREFIX, KEY_PREFIX

    client = locker.client  # every variant goes through the same client and connection pool
    trivial = client.script_load(TRIVIAL_LUA)
    token = "0" * 32 + "@host:12345"  # the length of one of our tokens
    lock_key, fence_key = KEY_PREFIX + NAME, FENCE_PREFIX + NAME
    rp_key, rp_fence = "redis-py:" + NAME, "redis-py:fence:" + NAME

    def floor() -> None:
        client.evalsha(trivial, 2, lock_key, fence_key, token, 30000)
        client.evalsha(trivial, 1, lock_key, token)

    def ping_pair() -> None:
        client.ping()
        client.ping()

    def ours() -> None:
        locker.release(locker.acquire(NAME, ttl_ms=30000, wait_s=0))

    def redis_py_lock_incr() -> None:
        lock = client.lock(rp_key, timeout=30)
        lock.acquire()
        client.incr(rp_fence)
        lock.release()

    def redis_py_lock() -> None:
        lock = client.lock(rp_key, timeout=30)
        lock.acquire()
        lock.release()

    return {
        "floor": floor,
        "ours": ours,
        "redis_py_lock_incr": redis_py_lock_incr,
        "redis_py_lock": redis_py_lock,
        "ping_pair": ping_pair,
    }


def _measure(variants: dict[str, Callable[[], None]]) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Pairs/s of each variant over all rounds, and each round's pairs/s."""
    for fn in variants.values():
        for _ in range(WARMUP):
            fn()
    names = list(variants)
    per_round = ITERATIONS // ROUNDS
    done = dict.fromkeys(names, 0)
    seconds = dict.fromkeys(names, 0.0)
    rounds: dict[str, list[float]] = {n: [] for n in names}
    for r in range(ROUNDS):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            gc.collect()
            n, s = _timed(variants[name], per_round, MAX_SECONDS / ROUNDS)
            done[name] += n
            seconds[name] += s
            rounds[name].append(n / s)
    return {n: done[n] / seconds[n] for n in names}, rounds


def _sqlite(tmp: str) -> tuple[float, float, dict[str, Any]]:
    """StoreLocker acquire+release pairs/s on SQLite, and two bare write transactions per pair."""
    from sqlalchemy import text

    from runtime_ops.locks.store_lock import StoreLocker
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    store = open_store(f"sqlite:///{tmp}/state.db", get_settings())
    locker = StoreLocker(store)
    with store.tx() as conn:
        conn.execute(text("CREATE TABLE bench_row (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"))
        conn.execute(text("INSERT INTO bench_row VALUES (1, 0)"))
    bump = text("UPDATE bench_row SET n = n + 1 WHERE id = 1")

    def bare() -> None:
        for _ in range(2):
            with store.tx() as conn:
                conn.execute(bump)

    def ours() -> None:
        locker.release(locker.acquire(NAME, ttl_ms=30000, wait_s=0))

    for fn in (bare, ours):
        for _ in range(50):
            fn()
    done = {"bare": 0, "ours": 0}
    secs = {"bare": 0.0, "ours": 0.0}
    for r in range(ROUNDS):
        for name, fn in (("bare", bare), ("ours", ours)) if r % 2 == 0 else (("ours", ours), ("bare", bare)):
            n, s = _timed(fn, SQLITE_ITERATIONS // ROUNDS, SQLITE_MAX_SECONDS / ROUNDS)
            done[name] += n
            secs[name] += s
    store.engine.dispose()
    rates = {k: done[k] / secs[k] for k in done}
    return rates["ours"], rates["bare"], {"pairs": done, "journal_mode": "wal", "synchronous": "default (FULL)"}


@benchmark("locks", "lock acquire+release: RedisLocker vs its raw round trips and redis-py Lock; StoreLocker on SQLite")
def locks_throughput() -> list[BenchResult]:
    from runtime_ops.locks.redis_lock import RedisLocker
    from runtime_ops_tests.support.servers import RedisServer

    server = RedisServer()
    locker: Any = None
    tmp = tempfile.TemporaryDirectory(prefix="bench_locks_")
    try:
        server.start()
        locker = RedisLocker(server.url)
        variants = _redis_variants(locker)
        commands = {name: _commands_per_pair(locker.client, variants[name]) for name in variants}
        rates, rounds = _measure(variants)
        sqlite_ours, sqlite_bare, sqlite_details = _sqlite(tmp.name)
    finally:
        if locker is not None:
            with contextlib.suppress(Exception):
                locker.close()
        server.close()
        tmp.cleanup()

    def per_round(ours: str, base: str) -> list[float]:
        return [round(o / b, 3) for o, b in zip(rounds[ours], rounds[base], strict=True)]

    common = {
        "iterations_per_variant": ITERATIONS,
        "rounds": ROUNDS,
        "pairs_per_s": {k: round(v, 1) for k, v in rates.items()},
        "us_per_pair": {k: round(1e6 / v, 1) for k, v in rates.items()},
        "per_pair": commands,
    }
    return [
        BenchResult(
            "locks.acquire_release_vs_floor",
            rates["ours"],
            rates["floor"],
            "pairs/s",
            Target("ratio", ">=", FLOOR_TARGET),
            {
                **common,
                "floor": "2 EVALSHA of `return 1` (same key/arg counts as ours) per pair, same client",
                "ratio_per_round": per_round("ours", "floor"),
                "vs_two_pings": round(rates["ours"] / rates["ping_pair"], 3),
            },
        ),
        BenchResult(
            "locks.acquire_release_vs_redis_py",
            rates["ours"],
            rates["redis_py_lock_incr"],
            "pairs/s",
            Target("ratio", ">=", REDIS_PY_TARGET),
            {
                "baseline": "redis-py client.lock(timeout=30).acquire() + INCR fence + release()",
                "ratio_per_round": per_round("ours", "redis_py_lock_incr"),
            },
        ),
        BenchResult(
            "locks.acquire_release_vs_redis_py_lock_only",
            rates["ours"],
            rates["redis_py_lock"],
            "pairs/s",
            Target("ratio", ">=", 0.0),  # informational: redis-py's Lock alone gives no fencing token
            {
                "informational": True,
                "baseline": "redis-py client.lock(timeout=30).acquire() + release(), no fencing token",
                "ratio_per_round": per_round("ours", "redis_py_lock"),
            },
        ),
        BenchResult(
            "locks.store_sqlite_acquire_release",
            sqlite_ours,
            sqlite_bare,
            "pairs/s",
            Target("ratio", ">=", 0.0),  # informational
            {
                "informational": True,
                "baseline": "two bare write transactions (one single-row UPDATE each) on the same SQLite engine",
                **sqlite_details,
            },
        ),
    ]
