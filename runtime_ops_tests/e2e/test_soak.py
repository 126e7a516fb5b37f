"""A short seeded chaos soak (`make soak` for the long one): the topology as local processes under the mixed workload
while the injector kills processes, restarts PostgreSQL, stops Redis and starves connections; the history checker
must find nothing lost, doubled or left half-done (runtime_ops_tests/soak/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_ops_tests.soak.harness import SoakConfig, run_soak

pytestmark = pytest.mark.slow(seconds=265)  # alone on 2 cores (Dec 2026): started first, see conftest.py

SEED = 20261205
# One of each family: a process killed (the daemon, the ops API, a run worker), PostgreSQL restarted, Redis
# stopped, the network to each reset, black-holed or slowed.
KINDS = ("kill_daemon", "kill_ops_api", "kill_run_worker", "postgres_restart", "redis_down", "pg_reset",
         "pg_blackhole", "redis_delay")  # fmt: skip


def test_a_seeded_soak_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def set_env(values: dict[str, str | None]) -> None:
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

    # Two minutes of faults and work; objects land every 3-6 s so that batches (one ingest run each) are fewer than
    # in `make soak`, where the landing never rests more than 4 s.
    cfg = SoakConfig(seed=SEED, minutes=2.0, out=tmp_path / "soak", kinds=KINDS, gap=(11.0, 15.0), warmup=10.0,
                     quiet_tail=15.0, expire_after="30s", drain_timeout=300.0, landing_gap=(3.0, 6.0))  # fmt: skip
    lines: list[str] = []
    history, verdict, report = run_soak(cfg, set_env, log=lines.append)
    with capsys.disabled():
        print("\n" + report)
    assert verdict.ok, report + "\n\n" + "\n".join(lines[-40:])
    kinds = {f.kind for f in history.faults}
    assert len(history.faults) >= 6 and len(kinds) >= 5, (len(history.faults), kinds, history.skipped)
    unrecovered = [f for f in history.faults if f.recovered is None]
    stuck = [line for line in lines if line.startswith(("[soak] not healthy", "[soak] --- stacks of"))]
    assert not unrecovered, "\n".join([repr(unrecovered), *stuck])
    searches = [c for c in history.calls if c.what == "search"]
    # Outside every fault's window (its start to its recovery, plus the clients' grace) every search is answered;
    # inside one, errors are the checker's to explain (verdict.ok: a 5xx or no answer outside them is a violation).
    windows = [f.window(history.grace) for f in history.faults]
    calm = [c for c in searches if not any(start <= c.t + c.latency_ms / 1000 and c.t <= end for start, end in windows)]
    assert calm and [c for c in calm if c.status != 200] == [], [c for c in calm if c.status != 200]
    assert any(c.what == "decision" and c.acknowledged for c in history.calls), "no decision reached the deployment"
