"""An asset gate (`ApprovalGate`) resolved from its attributes: what it gates, what approvers see, the rule that may
approve without them, who decides and by when, and what runs once a request is approved. Pure: no Dagster, no I/O.

Resolved by `pipeline/gate_resolve.py`, whose approval policy is the pipelines' own (`approval_spec`), so a gate and
a pipeline decide alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runtime_ops.pipeline.spec import ApprovalSpec

NAME = re.compile(r"^[a-z0-9_]{1,64}$")
KEY_PART = re.compile(r"^[A-Za-z0-9_\-]+$")  # Dagster's rule for a part of an asset key


@dataclass(frozen=True)
class OnApproval:
    """What an approved request launches, once: these assets (as one run), or a job of the project."""

    materialize: tuple[tuple[str, ...], ...] = ()
    job: str | None = None


@dataclass(frozen=True)
class GateSpec:
    name: str  # the requests' scope (the store's `pipeline` column) and the prefix of the gate's Dagster names
    target: tuple[str, ...]  # the gated asset's key path
    evidence: tuple[str, ...] = ()  # metadata fields of its materialization approvers see
    auto_approve: str | None = None  # `policies/gate_expression.py`
    approvals: ApprovalSpec = field(default_factory=ApprovalSpec)
    on_approval: OnApproval = field(default_factory=OnApproval)
    source: str = ""

    @property
    def target_label(self) -> str:
        return "/".join(self.target)

    def qualified(self, what: str) -> str:
        return f"{self.name}__{what}"


def target_label(target: tuple[str, ...], partition: str | None) -> str:
    """How a request names a gated materialization: "scoring/ticket_labels", one partition of it
    "scoring/ticket_labels[2026-12-01]"."""
    return "/".join(target) + (f"[{partition}]" if partition is not None else "")


def split_label(label: str) -> tuple[tuple[str, ...], str | None]:
    """The key path and partition a `target_label` names."""
    partition = None
    if label.endswith("]") and "[" in label:
        label, partition = label[:-1].split("[", 1)
    return tuple(label.split("/")), partition


def default_name(target: tuple[str, ...]) -> str:
    """A gate's name unless declared: its target's key joined with "__" (`scoring__ticket_labels`)."""
    return re.sub(r"[^a-z0-9_]", "_", "__".join(target).lower())[:64]
