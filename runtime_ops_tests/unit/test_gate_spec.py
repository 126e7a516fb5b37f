"""An `ApprovalGate`'s attributes resolve into its GateSpec at load: a hostile or malformed rule, a rule over fields
approvers do not see, a bad key or an impossible policy fail there, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from runtime_ops.components import ApprovalGate
from runtime_ops.pipeline.gate_resolve import resolve_gate
from runtime_ops.pipeline.gate_spec import split_label, target_label
from runtime_ops.pipeline.resolve import DeclarationError
from runtime_ops.settings import load_settings

BASE: dict[str, Any] = {
    "target": "scoring/ticket_labels",
    "evidence": ["accuracy", "cost_usd"],
    "approvers": ["U1", "U2"],
    "on_approval": {"job": "publish_job"},
}


def resolved(**attributes: Any):  # type: ignore[no-untyped-def]
    return resolve_gate(ApprovalGate.model_validate({**BASE, **attributes}), load_settings(), source="defs.yaml")


def test_a_gate_resolves_with_its_defaults_and_its_own_policy() -> None:
    spec = resolved(auto_approve="accuracy >= 0.92 and cost_usd < 50", required_approvals=2, expire_after="6h")
    assert (spec.name, spec.target, spec.target_label) == ("scoring__ticket_labels", ("scoring", "ticket_labels"),
                                                           "scoring/ticket_labels")  # fmt: skip
    assert spec.approvals.approvers == ("U1", "U2") and spec.approvals.required_approvals == 2
    assert spec.approvals.expire_after is not None and spec.approvals.expire_after.total_seconds() == 6 * 3600
    assert spec.on_approval.job == "publish_job" and spec.on_approval.materialize == ()
    assert resolved(name="labels", on_approval={"materialize": ["scoring/published"]}).on_approval.materialize == (
        ("scoring", "published"),
    )


@pytest.mark.parametrize(
    ("attributes", "field", "named"),
    [
        ({"auto_approve": "__import__('os').system('id')"}, "auto_approve", "the call"),
        ({"auto_approve": "accuracy.real > 1"}, "auto_approve", "the attribute"),
        ({"auto_approve": "labelled > 100"}, "auto_approve", "reads labelled, which evidence does not list"),
        ({"target": "scoring/ticket labels"}, "target", "is not an asset key"),
        ({"name": "Bad-Name"}, "name", "a gate's name is 1-64 of a-z"),
        ({"required_approvals": 3}, "required_approvals", "3 approvals required (required_approvals)"),
        ({"on_approval": {"materialize": ["a b"]}}, "on_approval.materialize", "is not an asset key"),
    ],
)
def test_a_gate_that_cannot_work_fails_at_load_naming_the_field(
    attributes: dict[str, Any], field: str, named: str
) -> None:
    with pytest.raises(DeclarationError) as refused:
        resolved(**attributes)
    assert ".".join(refused.value.field) == field and named in str(refused.value)
    assert str(refused.value).startswith(f"defs.yaml: attributes.{field}")


def test_on_approval_takes_exactly_one_action() -> None:
    for both_or_none in ({"job": "j", "materialize": ["a/b"]}, {}):
        with pytest.raises(ValidationError, match="exactly one of materialize"):
            ApprovalGate.model_validate({**BASE, "on_approval": both_or_none})


def test_labels_name_one_partition_and_read_back() -> None:
    assert target_label(("a", "b"), None) == "a/b" and split_label("a/b") == (("a", "b"), None)
    assert target_label(("a", "b"), "2026-12-01") == "a/b[2026-12-01]"
    assert split_label("a/b[2026-12-01]") == (("a", "b"), "2026-12-01")
