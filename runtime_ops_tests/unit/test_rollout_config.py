"""`rollout:` and `gate.online` in defs.yaml: defaults, what resolves into the spec, and each bad value refused with
the field named and what would do."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_ops.pipeline.attributes import PipelineAttributes
from runtime_ops.pipeline.resolve import resolve_spec
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.settings import Settings


def _spec(**attrs: Any) -> Any:
    parsed = PipelineAttributes.model_validate({"name": "demo", **attrs})
    return resolve_spec(parsed, Settings(), base_dir=Path("."))


def test_defaults_are_off_and_not_required() -> None:
    spec = _spec()
    assert spec.rollout == RolloutSpec() and not spec.rollout.enabled
    assert (spec.rollout.share, spec.rollout.sticky, spec.rollout.min_queries) == (0.05, "session", 500)
    assert (spec.rollout.max_duration, spec.rollout.ramp) == (timedelta(days=7), (0.05, 0.25, 1.0))
    assert spec.rollout.max_loss == 0.05
    assert spec.gate.online == OnlinePolicy(required=False, min_queries=500)


def test_declared_values_resolve() -> None:
    spec = _spec(
        rollout={"mode": "canary", "share": 0.2, "min_queries": 50, "max_duration": "36h", "ramp": [0.2, 1.0]},
        gate={"online": {"required": True, "min_queries": 80}, "max_regression": 0.1},
    )
    assert spec.rollout == RolloutSpec("canary", 0.2, "session", 50, timedelta(hours=36), (0.2, 1.0))
    assert spec.rollout.enabled and spec.rollout.ramps
    assert spec.gate.online == OnlinePolicy(True, 80) and spec.gate.max_regression == 0.1


def test_an_empty_ramp_promotes_at_once_and_mode_off_never_ramps() -> None:
    assert not _spec(rollout={"mode": "canary", "ramp": []}).rollout.ramps
    assert not _spec(rollout={"mode": "off", "ramp": [0.5, 1.0]}).rollout.ramps


@pytest.mark.parametrize(
    ("rollout", "field", "says"),
    [
        ({"mode": "ab"}, "rollout.mode", "must be one of off, shadow, interleave, canary"),
        ({"share": 0}, "rollout.share", "greater than 0"),
        ({"share": 1.5}, "rollout.share", "less than or equal to 1"),
        ({"sticky": "user"}, "rollout.sticky", "only session is supported for now"),
        ({"min_queries": 0}, "rollout.min_queries", "greater than or equal to 1"),
        ({"max_duration": "off"}, "rollout.max_duration", "a rollout needs an end"),
        ({"max_duration": "soon"}, "rollout.max_duration", "is not a duration"),
        ({"ramp": [0.5, 0.25, 1.0]}, "rollout.ramp", "must increase"),
        ({"ramp": [0.1, 0.5]}, "rollout.ramp", "must end at 1.0"),
        ({"ramp": [0, 1.0]}, "rollout.ramp", "above 0 and at most 1"),
        ({"max_loss": -0.01}, "rollout.max_loss", "greater than or equal to 0"),
        ({"max_loss": 1.0}, "rollout.max_loss", "less than 1"),
        ({"share": 0.1, "surprise": 1}, "rollout.surprise", "Extra inputs are not permitted"),
    ],
)
def test_bad_rollout_values_are_refused_by_name(rollout: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _spec(rollout=rollout)
    assert field in str(caught.value) and says in str(caught.value)


def test_online_min_queries_must_count_something() -> None:
    with pytest.raises(ValidationError, match=r"gate\.online\.min_queries"):
        _spec(gate={"online": {"required": True, "min_queries": 0}})
    with pytest.raises(ValueError, match=r"OnlinePolicy\.min_queries"):
        OnlinePolicy(min_queries=0)


def test_the_spec_checks_itself_when_built_in_code() -> None:
    with pytest.raises(ValueError, match=r"rollout\.share"):
        RolloutSpec(mode="canary", share=0.0)
    with pytest.raises(ValueError, match=r"rollout\.mode"):
        RolloutSpec(mode="blue-green")
    with pytest.raises(ValueError, match="only session"):
        RolloutSpec(sticky="account")


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_required_online_evidence_needs_a_rollout_that_can_decide(mode: str) -> None:
    with pytest.raises(ValidationError, match=r"gate\.online\.required needs a rollout that can decide") as caught:
        _spec(rollout={"mode": mode}, gate={"online": {"required": True}})
    assert "interleave or canary" in str(caught.value)
    assert _spec(rollout={"mode": mode}, gate={"online": {"required": False}}).gate.online.required is False
