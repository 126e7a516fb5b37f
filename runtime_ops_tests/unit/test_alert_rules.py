"""Remediation rules (file format, errors naming the line, matching), the webhook model and the rollback target."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from runtime_ops.alerts.rollback import previous_version
from runtime_ops.alerts.rules import EXAMPLE_RULES, RuleFileError, load_rules, parse_rules
from runtime_ops.alerts.webhook import MalformedPayload, alert_key, parse_payload

RULES = """\
version: 1
rules:
  - name: quality
    match:
      alertname: RetrievalQualityRegressed
    match_re:
      severity: critical|page
    action: rollback
    preapproved: true
    cooldown: 1h
  - name: stale-batch
    match: {alertname: EmbeddingsStale}
    action: reembed
    batch_label: batch
  - name: drift
    match_re: {alertname: "Corpus.*"}
    action: retrain
    cooldown: 90
  - name: rest
    action: notify
"""


def test_the_shipped_example_file_is_valid() -> None:
    rules = load_rules(EXAMPLE_RULES)
    assert [r.action for r in rules.rules] == ["rollback", "reembed", "reembed", "retrain", "notify"]
    assert rules.rules[0].preapproved is False and rules.rules[0].cooldown == timedelta(hours=1)
    # Both quality alerts (since the promotion, and day over day) roll back through the same rule: one cooldown.
    for alertname in ("RetrievalQualityDropped", "RetrievalQualityRegressed"):
        assert rules.match({"alertname": alertname, "severity": "critical"}) == rules.rules[0]
    assert rules.match({"alertname": "RetrievalQualityDroppedAgain", "severity": "critical"}).action == "notify"


def test_first_matching_rule_wins_and_regexes_are_anchored() -> None:
    rules = parse_rules(RULES)
    assert rules.match({"alertname": "RetrievalQualityRegressed", "severity": "page"}).name == "quality"
    # `critical|page` must match the whole value, as in Alertmanager: "paged" is not "page".
    assert rules.match({"alertname": "RetrievalQualityRegressed", "severity": "paged"}).name == "rest"
    assert rules.match({"alertname": "RetrievalQualityRegressed"}).name == "rest"  # missing label = ""
    assert rules.match({"alertname": "EmbeddingsStale", "batch": "b1"}).name == "stale-batch"
    assert rules.match({"alertname": "CorpusDrift"}).name == "drift"
    assert rules.rules[2].cooldown == timedelta(seconds=90)
    assert rules.rules[1].batch_label == "batch"


def test_no_rule_matches_without_a_catch_all() -> None:
    rules = parse_rules("rules:\n  - name: only\n    match: {alertname: A}\n    action: retrain\n")
    assert rules.match({"alertname": "B"}) is None
    assert parse_rules("rules: []\n").match({"alertname": "A"}) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rules:\n  - name: a\n    action: retrain\n"
            "  - name: b\n    match:\n      severity: 1\n    action: notify\n",
            "r.yaml:6: rule 2 ('b'): match.severity: Input should be a valid string",
        ),
        (
            "rules:\n  - name: a\n    action: restart\n",
            "r.yaml:3: rule 1 ('a'): action: Input should be 'retrain', 'reembed', 'rollback' or 'notify'",
        ),
        (
            "rules:\n  - name: a\n    action: notify\n    preapproved: true\n",
            "r.yaml:4: rule 1 ('a'): preapproved: preapproved applies to rollback rules only",
        ),
        (
            "rules:\n  - name: a\n    action: retrain\n    batch_label: batch\n",
            "r.yaml:4: rule 1 ('a'): batch_label: batch_label applies to reembed rules only",
        ),
        (
            "rules:\n  - name: a\n    match_re: {x: '('}\n    action: notify\n",
            "r.yaml:3: rule 1 ('a'): match_re: label 'x': invalid regular expression '('",
        ),
        (
            "rules:\n  - name: a\n    action: notify\n    colldown: 1h\n",
            "r.yaml:4: rule 1 ('a'): colldown: Extra inputs",
        ),
        ("rules:\n  - name: a\n    action: notify\n    cooldown: soon\n", "r.yaml:4: rule 1 ('a'): cooldown: 'soon'"),
        ("rules:\n  - name: a\n    action: retrain\n    action: notify\n", "r.yaml:4: key 'action' is given twice"),
        ("rules:\n  - name: a\n    action: [\n", "r.yaml:4: not valid YAML"),
        ("- name: a\n", "r.yaml:1: a rule file is a mapping with a `rules:` list"),
        (
            "rules:\n  - name: a\n    action: notify\n  - name: a\n    action: retrain\n",
            "r.yaml:1: two rules are named 'a'",
        ),
        ("rules:\n  - name: a\n    match: {9x: y}\n    action: notify\n", "'9x' is not a label name"),
        ("rules:\n  - action: notify\n", "r.yaml:2: rule 1: name: Field required"),
    ],
)
def test_errors_name_the_file_the_line_and_the_rule(text: str, expected: str) -> None:
    with pytest.raises(RuleFileError) as err:
        parse_rules(text, "r.yaml")
    assert expected in str(err.value)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(RuleFileError, match=r"missing\.yaml: cannot read"):
        load_rules(tmp_path / "missing.yaml")


# ---------------------------------------------------------------------------------------------- webhook payload
def _payload(**alert_overrides: object) -> dict:
    alert = {
        "status": "firing",
        "labels": {"alertname": "RetrievalQualityRegressed", "severity": "page"},
        "annotations": {"summary": "nDCG@5 fell"},
        "startsAt": "2026-11-29T10:00:00.123456789+01:00",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus/graph",
        "fingerprint": "c3b1f5e7a9d2b4c6",
        **alert_overrides,
    }
    return {
        "version": "4",
        "groupKey": '{}:{alertname="RetrievalQualityRegressed"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "runtime-ops",
        "groupLabels": {"alertname": "RetrievalQualityRegressed"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": [alert],
    }


def test_webhook_v4_is_parsed_with_utc_times_and_no_zero_end() -> None:
    payload = parse_payload(json.dumps(_payload()).encode())
    [alert] = payload.alerts
    assert alert.starts_at == datetime(2026, 11, 29, 9, 0, 0, 123456, tzinfo=UTC)
    assert alert.ends_at is None  # Go's zero time: still firing
    assert alert.alertname == "RetrievalQualityRegressed"
    assert alert.key == "alert-c3b1f5e7a9d2b4c6-20261129T090000.123456Z"
    assert alert.key == alert_key(alert.fingerprint, alert.starts_at.astimezone(timezone(timedelta(hours=5))))
    resolved = parse_payload(json.dumps(_payload(status="resolved", endsAt="2026-11-29T09:05:00Z"))).alerts[0]
    assert resolved.ends_at == datetime(2026, 11, 29, 9, 5, tzinfo=UTC) and resolved.key == alert.key


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "body is not JSON"),
        (b"[]", "body must be a JSON object"),
        (json.dumps({**_payload(), "version": "3"}).encode(), "version: Input should be '4'"),
        (json.dumps(_payload(startsAt="yesterday")).encode(), "alerts.0.startsAt"),
        (json.dumps(_payload(startsAt="2026-11-29T10:00:00")).encode(), "alerts.0.startsAt"),  # no timezone
        (json.dumps(_payload(startsAt="0001-01-01T00:00:00Z")).encode(), "startsAt is the zero time"),
        (json.dumps(_payload(fingerprint="")).encode(), "alerts.0.fingerprint"),
        (json.dumps(_payload(status="pending")).encode(), "alerts.0.status"),
        (json.dumps(_payload(labels={"alertname": 3})).encode(), "alerts.0.labels.alertname"),
    ],
)
def test_malformed_webhooks_are_refused_with_the_reason(body: bytes, reason: str) -> None:
    with pytest.raises(MalformedPayload) as err:
        parse_payload(body)
    assert reason in str(err.value)


# ---------------------------------------------------------------------------------------------- rollback target
def _h(old: int | None, new: int | None, actor: str = "alice") -> dict:
    return {"old_target": old, "new_target": new, "actor": actor}


@pytest.mark.parametrize(
    ("history", "current", "expected"),
    [
        ([], None, None),
        ([_h(None, 1, "policy")], 1, None),
        ([_h(None, 1, "policy"), _h(1, 2)], 2, 1),
        ([_h(None, 1), _h(1, 2), _h(2, 3)], 3, 2),
        # after rolling back 3 -> 2 the previous version of 2 is 1, never the version rolled back from
        ([_h(None, 1), _h(1, 2), _h(2, 3), _h(3, 2, "rollback:preapproved")], 2, 1),
        ([_h(None, 1), _h(1, 2), _h(2, 1, "rollback:alice")], 1, None),
        # a promotion that was compensated never really served
        ([_h(None, 1), _h(1, 2), _h(2, 3), _h(3, 2, "compensation")], 2, 1),
        # a plain re-promotion of an older version: the previous one is the version it replaced
        ([_h(None, 1), _h(1, 2), _h(2, 1)], 1, 2),
    ],
)
def test_previous_version_comes_from_the_alias_history(
    history: list, current: int | None, expected: int | None
) -> None:
    assert previous_version(history, current) == expected
