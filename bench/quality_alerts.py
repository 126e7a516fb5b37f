"""Detection of a drop in production's helpful share by the shipped alert rules, evaluated by promtool.

Simulated judgements at 1 a second on one production version (`bench/_quality_series.py`): the share drops by 20 %
(0.75 -> 0.60) 30 minutes after a fresh install (no history) or after a day of history, and a third stream stays
stable for a day. promtool evaluates the shipped `docker/prometheus/rules.yml` (its quality alerts and their
recording rules, verbatim) every minute; a check per minute after the drop says when each alert is firing.

Rows, per scenario (median over BENCH_QUALITY_SEEDS seeds, 3; the maximum is in the details):
- `quality_alerts.<scenario>.to_alert`: minutes from the drop to the first quality alert firing. Ours: the first of
  RetrievalQualityDropped (the ops API's CUSUM) and RetrievalQualityRegressed; baseline: RetrievalQualityRegressed
  alone (the day-over-day rule before this change). Not firing within 40 minutes counts as 40.
- `quality_alerts.<scenario>.to_rollback_request`: the same plus what follows a firing alert with the shipped
  settings: Alertmanager's group_wait (30 s by default) and the alert sensor's interval (15 s), upper bounds.
- `quality_alerts.stable_day.false_alarms`: days of a stable stream in which any quality alert was pending or firing.
Target: at most 10 minutes to the alert and to the request, no false alarm. About 2 minutes on 2 cores.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench._quality_series import QUALITY_ALERTS, Scenario, firing, never_fired, promtool_file, quality_rules, scenarios
from bench.common import BenchResult, Target, benchmark

SEEDS = int(os.environ.get("BENCH_QUALITY_SEEDS", "3"))
RULES = Path(__file__).resolve().parents[1] / "docker" / "prometheus" / "rules.yml"
HORIZON = 40  # minutes after the drop that are checked
AFTER_ALERT = 0.5 + 0.25  # Alertmanager group_wait + the alert sensor's interval, in minutes
_FAILED_AT = re.compile(r'alertname=\\?"(\w+)\\?",alertstate=\\?"firing\\?"\}", time: ((?:\d+d)?(?:\d+h)?(?:\d+m)?),')


def _minutes(duration: str) -> int:
    parts = dict((unit, int(n)) for n, unit in re.findall(r"(\d+)([dhm])", duration))
    return parts.get("d", 0) * 1440 + parts.get("h", 0) * 60 + parts.get("m", 0)


def _promtool(folder: Path, s: Scenario, checks: list[dict[str, Any]]) -> str:
    (folder / "rules.yml").write_text(yaml.safe_dump(quality_rules(yaml.safe_load(RULES.read_text()))))
    (folder / "test.yml").write_text(yaml.safe_dump(promtool_file("rules.yml", s, checks), sort_keys=False))
    result = subprocess.run(["promtool", "test", "rules", "test.yml"], cwd=folder, capture_output=True, text=True)
    return result.stdout + result.stderr


def first_firing(folder: Path, s: Scenario) -> dict[str, int]:
    """Minutes from the drop to the first minute each quality alert is firing (HORIZON when it never does)."""
    assert s.drop_at is not None
    minutes = range(s.drop_at + 1, s.drop_at + HORIZON + 1)
    output = _promtool(folder, s, [firing(name, m) for name in QUALITY_ALERTS for m in minutes])
    silent: dict[str, set[int]] = {name: set() for name in QUALITY_ALERTS}
    for name, at in _FAILED_AT.findall(output):
        silent[name].add(_minutes(at))
    return {name: next((m - s.drop_at for m in minutes if m not in off), HORIZON) for name, off in silent.items()}


@benchmark("quality_alerts", "minutes from a 20 % drop in production's helpful share to the alert; false alarms")
def run() -> list[BenchResult]:
    fresh, day, stable = scenarios()
    results: list[BenchResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for base in (fresh, day):
            runs = [first_firing(folder, Scenario(**{**base.__dict__, "seed": seed})) for seed in range(SEEDS)]
            ours = [min(r.values()) for r in runs]
            before = [r["RetrievalQualityRegressed"] for r in runs]
            details = {"per_seed": runs, "max_minutes": max(ours), "drop": "0.75 -> 0.60 at 1 judgement/s"}
            results.append(
                BenchResult(
                    f"quality_alerts.{base.name}.to_alert",
                    statistics.median(ours),
                    statistics.median(before),
                    "minutes",
                    Target("ours", "<=", 10),
                    details,
                )
            )
            results.append(
                BenchResult(
                    f"quality_alerts.{base.name}.to_rollback_request",
                    statistics.median(ours) + AFTER_ALERT,
                    statistics.median(before) + AFTER_ALERT,
                    "minutes",
                    Target("ours", "<=", 10),
                    {"added": "Alertmanager group_wait 30 s + alert sensor interval 15 s (upper bounds)"},
                )
            )
        alarms = [
            "FAILED" in _promtool(folder, s, [never_fired(s.minutes)])
            for s in (Scenario(**{**stable.__dict__, "seed": seed}) for seed in range(SEEDS))
        ]
        results.append(
            BenchResult(
                "quality_alerts.stable_day.false_alarms",
                float(sum(alarms)),
                float(len(alarms)),
                "days with an alarm",
                Target("ours", "<=", 0),
                {"days": len(alarms)},
            )
        )
    return results
