"""Simulated production judgements as promtool input: the series the ops API would expose for them and the
scenarios the live-quality alerts are held to (bench/quality_alerts.py, runtime_ops_tests/integration/
test_quality_alert_rules.py).

A stream of `rate` judgements a second on one production version, each helpful with probability `share` (times
1 - `drop` from `drop_at` on), gives two families sampled every minute: the feedback counters
(`runtime_ops_feedback_total{arm="production",signal=helpful|not_helpful}`, what the day-over-day rule reads) and
the CUSUM gauge with its threshold (`runtime_ops_quality_cusum`, what `RetrievalQualityDropped` reads). The gauge is
`online/quality_cusum.py` fed the stream's 30 s slots up to each sample, which is what `/metrics` serves when every
judgement arrives with its request (`observability/quality.py`, checked on a real store by
test_quality_metrics.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from runtime_ops.online.quality_cusum import DEFAULT_DESIGN, CusumDesign, QualityCusum

PIPELINE = "demo"
QUALITY_ALERTS = ("RetrievalQualityDropped", "RetrievalQualityRegressed")


@dataclass(frozen=True)
class Scenario:
    name: str
    minutes: int  # how long the series run (a sample a minute, from minute 0 = the promotion)
    drop_at: int | None  # the minute the share drops, None for a stable stream
    share: float = 0.75
    drop: float = 0.2  # relative: 0.75 -> 0.60
    rate: float = 1.0  # judgements a second
    seed: int = 0


def scenarios(seed: int = 0) -> tuple[Scenario, Scenario, Scenario]:
    """The issue's three: (a) a 20 % drop 30 minutes after a fresh install, (b) the same after a day of history,
    (c) a day of a stable stream on a fresh install."""
    return (
        Scenario("fresh", minutes=30 + 40, drop_at=30, seed=seed),
        Scenario("day_of_history", minutes=1440 + 40, drop_at=1440, seed=seed),
        Scenario("stable_day", minutes=1440, drop_at=None, seed=seed),
    )


def _values(samples: list[float]) -> str:
    return " ".join(f"{v:g}" for v in samples)


def input_series(s: Scenario, design: CusumDesign = DEFAULT_DESIGN) -> list[dict[str, str]]:
    """promtool `input_series` for scenario `s`: one sample a minute, minutes 0..s.minutes."""
    rng = random.Random(s.seed)
    per_slot = s.rate * design.bin_seconds
    slots_per_minute = 60 // design.bin_seconds
    cusum = QualityCusum(design)
    helpful = judged = 0
    carry = 0.0
    h_samples, n_samples, c_samples = [0.0], [0.0], [0.0]
    for minute in range(s.minutes):
        p = s.share * (1 - s.drop) if s.drop_at is not None and minute >= s.drop_at else s.share
        for _ in range(slots_per_minute):
            carry += per_slot
            n = int(carry)
            carry -= n
            k = sum(rng.random() < p for _ in range(n))
            cusum.add(k, n)
            helpful += k
            judged += n
        h_samples.append(helpful)
        n_samples.append(judged - helpful)
        c_samples.append(round(cusum.statistic, 4))
    labels = f'pipeline="{PIPELINE}",arm="production",model_version="1"'
    return [
        {"series": f'runtime_ops_feedback_total{{{labels},signal="helpful"}}', "values": _values(h_samples)},
        {"series": f'runtime_ops_feedback_total{{{labels},signal="not_helpful"}}', "values": _values(n_samples)},
        {
            "series": f'runtime_ops_quality_cusum{{pipeline="{PIPELINE}",model_version="1"}}',
            "values": _values(c_samples),
        },
        {
            "series": f'runtime_ops_quality_cusum_threshold{{pipeline="{PIPELINE}"}}',
            "values": _values([design.threshold] * len(c_samples)),
        },
    ]


def never_fired(until_minute: int) -> dict[str, Any]:
    """A promql_expr_test: no quality alert was pending or firing at any evaluation up to `until_minute`."""
    alerts = "|".join(QUALITY_ALERTS)
    return {
        "expr": f'count_over_time(ALERTS{{alertname=~"{alerts}"}}[{until_minute}m])',
        "eval_time": f"{until_minute}m",
        "exp_samples": [],
    }


def firing(alertname: str, minute: int) -> dict[str, Any]:
    """A promql_expr_test: `alertname` is firing for the pipeline at `minute` (read from ALERTS, so the check does
    not depend on the annotations' wording)."""
    return {
        "expr": f'ALERTS{{alertname="{alertname}",alertstate="firing"}}',
        "eval_time": f"{minute}m",
        "exp_samples": [
            {
                "labels": f'ALERTS{{alertname="{alertname}",alertstate="firing",pipeline="{PIPELINE}",'
                'severity="critical"}',
                "value": 1,
            }
        ],
    }


def quality_rules(rules_yml: dict[str, Any]) -> dict[str, Any]:
    """The shipped rule file cut to what the quality alerts read (their recording rules and themselves), verbatim:
    promtool evaluates a day of minutes in a third of the time."""
    groups = []
    for group in rules_yml["groups"]:
        kept = [
            r
            for r in group["rules"]
            if r.get("alert") in QUALITY_ALERTS
            or "feedback_judged" in r.get("record", "")
            or "feedback_helpful_ratio" in r.get("record", "")
        ]
        if kept:
            groups.append({**group, "rules": kept})
    return {"groups": groups}


def promtool_file(rules: str, s: Scenario, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """A promtool test file for scenario `s` against the rule file `rules`, with promql_expr_test `checks`."""
    return {
        "rule_files": [rules],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": input_series(s),
                "promql_expr_test": checks,
            }
        ],
    }
