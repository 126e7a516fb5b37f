"""Which fault the soak injects when, drawn from a seed (pure: the same seed and duration give the same plan, so a
failing soak is replayed with `make soak SOAK_SEED=<its seed>`).

Kinds are drawn from a shuffled bag, as a fair randomizer does: every kind comes once before any comes twice,
so a run long enough for N bags injects every kind N times whatever the seed. The gap before each fault and how
long it is held are drawn too, within the kind's bounds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["KINDS", "FaultKind", "PlannedFault", "plan"]


@dataclass(frozen=True)
class FaultKind:
    name: str
    what: str
    hold: tuple[float, float] = (0.0, 0.0)  # seconds the fault lasts before it is lifted (0: a kill, restarted at once)


KINDS: tuple[FaultKind, ...] = (
    FaultKind("kill_daemon", "SIGKILL dagster-daemon (sensors, run queue, retries), then restart it"),
    FaultKind("kill_code_server", "SIGKILL the gRPC code server and the run workers it started, then restart it"),
    FaultKind("kill_run_worker", "SIGKILL the worker of a run in progress (and its step processes)"),
    FaultKind("kill_ops_api", "SIGKILL `runtime-ops serve`, then restart it on its port"),
    FaultKind("kill_webserver", "SIGKILL dagster-webserver, then restart it on its port"),
    FaultKind("postgres_restart", "restart PostgreSQL (immediate shutdown: every connection dropped)"),
    FaultKind("redis_down", "stop Redis, start it again 20 s later (its data is gone: no persistence)", (20.0, 20.0)),
    FaultKind("lock_holder_stop", "SIGSTOP the process holding a lock past the lock's TTL, then SIGCONT", (0.0, 0.0)),
    FaultKind("pg_delay", "delay every chunk between the deployment and PostgreSQL by 200-500 ms", (5.0, 12.0)),
    FaultKind("pg_reset", "reset every connection to PostgreSQL, and new ones for a while", (1.0, 4.0)),
    FaultKind("pg_blackhole", "black-hole the connections to PostgreSQL (a partition), then heal", (3.0, 8.0)),
    FaultKind("redis_delay", "delay every chunk between the deployment and Redis by 200-500 ms", (5.0, 12.0)),
    FaultKind("redis_reset", "reset every connection to Redis, and new ones for a while", (1.0, 4.0)),
    FaultKind("redis_blackhole", "black-hole the connections to Redis, then heal", (3.0, 8.0)),
)
BY_NAME = {k.name: k for k in KINDS}


@dataclass(frozen=True)
class PlannedFault:
    at: float  # seconds after the workload starts
    kind: str
    hold: float  # seconds the fault lasts (redis_down: 20; proxies: drawn; kills: 0)
    magnitude: float = 0.0  # a delay's seconds per chunk


def plan(
    seed: int,
    duration: float,
    kinds: tuple[str, ...] | None = None,
    gap: tuple[float, float] = (18.0, 36.0),
    warmup: float = 20.0,
    quiet_tail: float = 0.0,
) -> list[PlannedFault]:
    """Faults from `warmup` seconds to `duration - quiet_tail`, one every `gap` seconds (drawn), kinds from a
    shuffled bag of `kinds` (all by default). Faults overlap when one is held longer than the next gap."""
    names = list(kinds or BY_NAME)
    unknown = sorted(set(names) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(BY_NAME)}")
    rng = random.Random(seed)
    out: list[PlannedFault] = []
    bag: list[str] = []
    at = warmup
    while at <= duration - quiet_tail:
        if not bag:
            bag = names[:]
            rng.shuffle(bag)
        name = bag.pop()
        low, high = BY_NAME[name].hold
        magnitude = round(rng.uniform(0.2, 0.5), 2) if name.endswith("_delay") else 0.0
        out.append(PlannedFault(at=round(at, 2), kind=name, hold=round(rng.uniform(low, high), 2), magnitude=magnitude))
        at += rng.uniform(*gap)
    return out
