"""The live-quality alerts of the shipped `docker/prometheus/rules.yml`, evaluated by promtool over simulated
production judgements at 1 a second (`bench/_quality_series.py`): a 20 % drop in production's helpful share
(0.75 -> 0.60) fires `RetrievalQualityDropped` within 10 minutes on a fresh install (30 minutes after the promotion,
no history) and after a day of history; a day of a stable stream fires no quality alert at all; and without the
CUSUM rule no quality alert fires within those 10 minutes on the fresh install (the day-over-day rule fires, later)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench._quality_series import Scenario, firing, never_fired, promtool_file, quality_rules, scenarios
from runtime_ops_tests.support.servers import require_binary

pytestmark = pytest.mark.slow(seconds=25)  # promtool evaluates two days of minutes (~10 s each on a busy machine)

RULES = Path(__file__).resolve().parents[2] / "docker" / "prometheus" / "rules.yml"
FRESH, DAY_OF_HISTORY, STABLE_DAY = scenarios()
DROPPED = "RetrievalQualityDropped"


def _promtool(tmp_path: Path, rules: dict[str, Any], s: Scenario, checks: list[dict[str, Any]]) -> str:
    """Run promtool on scenario `s` with `checks`; its output, and an AssertionError naming the failures."""
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(promtool_file("rules.yml", s, checks), sort_keys=False))
    promtool = require_binary("promtool", "prometheus")
    result = subprocess.run(
        [promtool, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{s.name}: {output}"
    return output


def _shipped() -> dict[str, Any]:
    return quality_rules(yaml.safe_load(RULES.read_text()))


@pytest.mark.parametrize("s", [FRESH, DAY_OF_HISTORY], ids=lambda s: s.name)
def test_a_20_percent_drop_fires_within_10_minutes_with_or_without_history(tmp_path: Path, s: Scenario) -> None:
    assert s.drop_at is not None
    checks = [never_fired(s.drop_at), firing(DROPPED, s.drop_at + 10), firing(DROPPED, s.minutes)]
    _promtool(tmp_path, _shipped(), s, checks)


def test_a_stable_day_fires_no_quality_alert(tmp_path: Path) -> None:
    _promtool(tmp_path, _shipped(), STABLE_DAY, [never_fired(STABLE_DAY.minutes)])


def test_without_the_cusum_rule_a_fresh_install_does_not_notice_the_drop(tmp_path: Path) -> None:
    rules = _shipped()
    for group in rules["groups"]:
        group["rules"] = [r for r in group["rules"] if r.get("alert") != DROPPED]
    assert FRESH.drop_at is not None
    with pytest.raises(AssertionError, match=DROPPED):
        _promtool(tmp_path, rules, FRESH, [firing(DROPPED, FRESH.drop_at + 10)])
    _promtool(tmp_path, rules, FRESH, [never_fired(FRESH.drop_at + 10)])  # nor the day-over-day rule in time
