"""An `ApprovalGate`'s attributes resolved into its `GateSpec`: keys checked, the name defaulted, the auto-approve
rule compiled (a hostile or malformed rule fails the load, naming the token), and the approval policy filled in from
the process-wide settings exactly as a pipeline's is (`approval_spec`)."""

from __future__ import annotations

from runtime_ops.pipeline.asset_gate_attributes import GateAttributes
from runtime_ops.pipeline.gate_spec import KEY_PART, NAME, GateSpec, OnApproval, default_name
from runtime_ops.pipeline.resolve import DeclarationError, approval_spec
from runtime_ops.policies.gate_expression import GateExpressionError, compile_rule
from runtime_ops.settings import Settings


def asset_path(text: str, field: str, source: str = "") -> tuple[str, ...]:
    """An asset key written as in the Dagster UI (`scoring/ticket_labels`), checked part by part."""
    path = tuple(text.strip().split("/"))
    if not all(KEY_PART.match(p) for p in path):
        raise DeclarationError(
            tuple(field.split(".")),
            f"{text!r} is not an asset key: write its parts with '/' (letters, digits, _ and -)",
            source,
        )
    return path


def resolve_gate(attrs: GateAttributes, settings: Settings, *, source: str = "") -> GateSpec:
    target = asset_path(attrs.target, "target", source)
    name = attrs.name or default_name(target)
    if not NAME.match(name):
        raise DeclarationError(("name",), f"{name!r}: a gate's name is 1-64 of a-z, 0-9 and _", source)
    if attrs.auto_approve is not None:
        try:
            rule = compile_rule(attrs.auto_approve)
        except GateExpressionError as exc:
            raise DeclarationError(("auto_approve",), str(exc), source) from None
        unseen = [n for n in rule.names if n not in attrs.evidence]
        if unseen:
            # Approvers must see what the rule decided on: a rule over hidden fields approves on evidence nobody reads.
            raise DeclarationError(
                ("auto_approve",),
                f"reads {', '.join(unseen)}, which evidence does not list: add them to evidence "
                f"({list(attrs.evidence)})",
                source,
            )
    on = attrs.on_approval
    on_approval = OnApproval(
        materialize=tuple(asset_path(k, "on_approval.materialize", source) for k in on.materialize or ()),
        job=on.job,
    )
    return GateSpec(
        name=name,
        target=target,
        evidence=tuple(attrs.evidence),
        auto_approve=attrs.auto_approve,
        approvals=approval_spec(attrs, settings, owner=f"approval gate {name!r}", source=source, section=()),
        on_approval=on_approval,
        source=source,
    )
