"""Per-tier totals for `make test`'s summary (section "time per tier"): for runtime_ops_tests/{unit,integration,e2e}
the number of tests, their outcomes and their summed test time (setup + call + teardown), and the run's wall time;
then the slowest files.

`TierReport` is a plugin that conftest.py registers: pytest-xdist sends every worker's reports to the controller,
whose `pytest_runtest_logreport` adds them up and whose `pytest_terminal_summary` prints them. Summed times add up
the workers' parallel work, so with two workers busy they exceed the wall time; the summary says so.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

TIERS = ("unit", "integration", "e2e")
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def tier_of(nodeid: str) -> str:
    """The tier folder a test's file is in (`runtime_ops_tests/<tier>/...`), else "other"."""
    folders = nodeid.split("::", 1)[0].split("/")[:-1]
    return next((part for part in folders if part in TIERS), "other")


def _outcome(report: Any) -> str | None:
    """What one phase's report says about its test: None when it adds nothing (a passed setup or teardown)."""
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            return "xfailed" if report.skipped else "xpassed"
        return str(report.outcome)
    if report.failed:
        return "error"
    if report.skipped:
        return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    return None


@dataclass
class TierTimes:
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # nodeid -> summed phases
    outcome: dict[str, str] = field(default_factory=dict)  # nodeid -> its worst outcome

    def add(self, report: Any) -> None:
        self.seconds[report.nodeid] += float(report.duration)
        outcome = _outcome(report)
        if outcome is not None and self.outcome.get(report.nodeid) not in ("failed", "error"):
            self.outcome[report.nodeid] = outcome

    def lines(self, wall_seconds: float, workers: int) -> list[str]:
        tests: dict[str, list[str]] = defaultdict(list)
        for nodeid in self.seconds:
            tests[tier_of(nodeid)].append(nodeid)
        tiers = [t for t in (*TIERS, "other") if tests.get(t)]
        lines = []
        for tier in tiers:
            counts = {o: sum(self.outcome.get(n) == o for n in tests[tier]) for o in OUTCOMES}
            said = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
            total = sum(self.seconds[n] for n in tests[tier])
            lines.append(f"{tier:<12} {_tests(len(tests[tier]))}  {_duration(total):>10}  ({said})")
        count = sum(len(v) for v in tests.values())
        ran_on = f"{workers} workers" if workers > 1 else "one process"
        lines.append(
            f"{'whole run':<12} {_tests(count)}  {_duration(wall_seconds):>10}  wall time, {ran_on} "
            "(a tier's time: its tests' setup + call + teardown, summed across workers)"
        )
        return lines

    def slowest_files(self, n: int = 15) -> list[str]:
        """The `n` files with the most summed test time: where a cut of the suite's wall time has to come from
        (with --dist loadfile a file runs on one worker, so its sum is also its share of that worker's time)."""
        files: dict[str, float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        for nodeid, seconds in self.seconds.items():
            path = nodeid.split("::", 1)[0]
            files[path] += seconds
            counts[path] += 1
        ranked = sorted(files.items(), key=lambda item: item[1], reverse=True)[:n]
        return [f"{_duration(seconds):>10}  {_tests(counts[path])}  {path}" for path, seconds in ranked]


def _tests(n: int) -> str:
    return f"{n:>5} test{'' if n == 1 else 's'}"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{seconds:.1f} s"


class TierReport:
    """The pytest plugin: collects on the controller (or the only process) and prints one line per tier."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.times = TierTimes()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.times.add(report)

    @pytest.hookimpl(trylast=True)  # after conftest.py's own sections
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.times.seconds:
            return
        workers = getattr(self.config.option, "numprocesses", None) or 1
        terminalreporter.section("time per tier")
        for line in self.times.lines(time.monotonic() - self.started, int(workers)):
            terminalreporter.write_line(line)
        terminalreporter.section("slowest files (summed setup + call + teardown)")
        for line in self.times.slowest_files():
            terminalreporter.write_line(line)
