"""The online half of the gate (`policies/gate_rule.judge_online`): when live-traffic evidence approves, rejects or
makes a pending request wait."""

from __future__ import annotations

import pytest

from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.policies.gate_rule import judge_online

REQUIRED, SHOWN = OnlinePolicy(required=True, min_queries=50), OnlinePolicy()


@pytest.mark.parametrize("policy", [REQUIRED, SHOWN])
def test_a_confident_loss_rejects_whether_or_not_online_evidence_is_required(policy: OnlinePolicy) -> None:
    for offline in (True, False):
        ruling = judge_online(policy=policy, offline_auto_approve=offline, first_model=False, verdict="worse")
        assert ruling.action == "reject" and "loses" in ruling.reason


def test_required_evidence_approves_only_with_the_offline_auto_approve_and_an_online_win() -> None:
    def action(offline: bool, verdict: str | None, decides: bool = True) -> str:
        return judge_online(
            policy=REQUIRED, offline_auto_approve=offline, first_model=False, verdict=verdict, decides=decides
        ).action

    assert action(True, "better") == "approve"
    assert action(False, "better") == "wait"  # the offline half still needs a person
    for verdict in ("no difference yet", "not enough queries", None):
        assert action(True, verdict) == "wait"
    assert action(True, "no difference yet", decides=False) == "wait"  # shadow informs only
    assert action(True, "worse", decides=False) == "wait"  # ...and never rejects either
    # Not required: an online win approves nothing by itself.
    assert judge_online(policy=SHOWN, offline_auto_approve=True, first_model=False, verdict="better").action == "none"


def test_an_error_never_approves_and_a_first_model_skips_the_online_half() -> None:
    failed = judge_online(policy=REQUIRED, offline_auto_approve=True, first_model=False, verdict=None, error="boom")
    assert failed.action == "wait" and "boom" in failed.reason
    first = judge_online(policy=REQUIRED, offline_auto_approve=True, first_model=True, verdict="worse")
    assert first.action == "none" and "first model" in first.reason
