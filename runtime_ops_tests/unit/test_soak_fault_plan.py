"""The soak's fault plan: a seed gives one plan, every kind comes before any comes twice, and a 30-minute soak gets
the faults its acceptance asks for (runtime_ops_tests/soak/fault_plan.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from runtime_ops_tests.soak.fault_plan import KINDS, plan


def test_the_same_seed_gives_the_same_plan_and_another_seed_another() -> None:
    assert plan(11, 600) == plan(11, 600)
    assert plan(11, 600) != plan(12, 600)


def test_thirty_minutes_inject_at_least_40_faults_of_every_kind() -> None:
    for seed in range(20):
        faults = plan(seed, 30 * 60)
        kinds = Counter(f.kind for f in faults)
        assert len(faults) >= 40, (seed, len(faults))
        assert set(kinds) == {k.name for k in KINDS} and len(kinds) >= 8
        assert all(20 <= f.at <= 1800 for f in faults)


def test_every_kind_comes_once_before_any_comes_twice() -> None:
    faults = plan(3, 30 * 60)
    n = len(KINDS)
    for start in range(0, len(faults) - n + 1, n):
        assert len({f.kind for f in faults[start : start + n]}) == n


def test_holds_and_delays_stay_within_each_kind_s_bounds() -> None:
    bounds = {k.name: k.hold for k in KINDS}
    for f in plan(5, 3600):
        low, high = bounds[f.kind]
        assert low <= f.hold <= high
        assert (0.2 <= f.magnitude <= 0.5) if f.kind.endswith("_delay") else f.magnitude == 0.0
    assert {f.hold for f in plan(5, 3600) if f.kind == "redis_down"} == {20.0}


def test_a_short_plan_keeps_to_the_kinds_asked_and_a_quiet_tail() -> None:
    faults = plan(1, 170, kinds=("kill_daemon", "pg_reset", "redis_down"), warmup=10, quiet_tail=40)
    assert faults and {f.kind for f in faults} <= {"kill_daemon", "pg_reset", "redis_down"}
    assert all(10 <= f.at <= 130 for f in faults)


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown fault kinds \['kill_everything'\]; known: \["):
        plan(1, 60, kinds=("kill_everything",))
