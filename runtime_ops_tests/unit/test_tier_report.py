"""The `make test` summary's arithmetic: tiers from paths, and files ranked by their summed phases."""

from types import SimpleNamespace

from runtime_ops_tests.support.tier_report import TierTimes, tier_of


def _report(nodeid: str, when: str, duration: float) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, when=when, duration=duration, outcome="passed", failed=False, skipped=False)


def test_files_are_ranked_by_the_sum_of_their_tests_phases() -> None:
    times = TierTimes()
    for nodeid, when, seconds in [
        ("runtime_ops_tests/e2e/test_a.py::test_one", "setup", 30.0),
        ("runtime_ops_tests/e2e/test_a.py::test_one", "call", 5.0),
        ("runtime_ops_tests/integration/test_b.py::test_one", "call", 20.0),
        ("runtime_ops_tests/integration/test_b.py::test_two", "call", 20.0),
        ("runtime_ops_tests/unit/test_c.py::test_one", "call", 0.5),
    ]:
        times.add(_report(nodeid, when, seconds))
    ranked = times.slowest_files(2)
    assert [line.split()[-1] for line in ranked] == [
        "runtime_ops_tests/integration/test_b.py",
        "runtime_ops_tests/e2e/test_a.py",
    ]
    assert "40.0 s" in ranked[0] and "2 tests" in ranked[0]
    assert tier_of("runtime_ops_tests/e2e/test_a.py::test_one") == "e2e"
