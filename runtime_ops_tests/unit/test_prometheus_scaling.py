"""The chain test's copy of docker/prometheus/rules.yml (`support/prometheus.py`): only durations change, all by one
factor, so what the real Prometheus evaluates there is the shipped rules on a faster clock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from runtime_ops_tests.support.prometheus import duration_ms, scaled_rules

RULES = Path(__file__).resolve().parents[2] / "docker" / "prometheus" / "rules.yml"


def test_durations_are_read_as_prometheus_writes_them() -> None:
    assert duration_ms("1h30m") == 5_400_000
    assert duration_ms("250ms") == 250
    assert duration_ms("1d") == 86_400_000
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        duration_ms("30 minutes")


def test_ranges_offsets_and_for_are_divided_and_nothing_else() -> None:
    rule = (
        "      - record: pipeline:x:increase30m\n"
        '        expr: increase(x{window="30m"}[30m]) / increase(x[1d] offset 30m) > 5\n'
        "        for: 5m\n"
    )
    assert scaled_rules(rule, 120) == (
        "      - record: pipeline:x:increase30m\n"
        '        expr: increase(x{window="30m"}[15s]) / increase(x[720s] offset 15s) > 5\n'
        "        for: 2500ms\n"
    )
    with pytest.raises(ValueError, match="below a millisecond"):
        scaled_rules("expr: rate(x[1ms])", 2)


def test_the_shipped_rules_keep_their_expressions_thresholds_and_labels() -> None:
    def shape(text: str) -> list[dict[str, object]]:
        rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
        for r in rules:
            r["expr"] = re.sub(r"\[[^\]]+\]", "[D]", re.sub(r"offset \w+", "offset D", r["expr"]))
            r.pop("for", None)
        return rules

    real = RULES.read_text()
    fast = scaled_rules(real, 240)
    assert shape(fast) == shape(real)
    fors = [r.get("for") for g in yaml.safe_load(fast)["groups"] for r in g["rules"] if "alert" in r]
    assert "2500ms" in fors and "10m" not in fors  # the live-quality alerts' 10m
    assert "[7500ms]" in fast and "[1d]" not in fast
