"""`ApprovalGate`: the Dagster component that puts a person (or a safe rule) between any asset and what follows it.

Declared in a project's `defs/<name>/defs.yaml` (`type: runtime_ops.components.ApprovalGate`), or in code with
`approval_gate(target=..., ...)`; both build `approvals/asset_gate.py:approval_gate_defs` from the resolved
`GateSpec` (`pipeline/gate_resolve.py`), so a malformed rule or an impossible policy fails `dg check defs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from runtime_ops.approvals.asset_gate import approval_gate_defs
from runtime_ops.pipeline.asset_gate_attributes import GateAttributes
from runtime_ops.pipeline.gate_resolve import resolve_gate
from runtime_ops.pipeline.gate_spec import GateSpec
from runtime_ops.pipeline.resolve import LOADING_SETTINGS
from runtime_ops.settings import Settings, get_settings


class ApprovalGate(dg.Component, GateAttributes):
    """A blocking approval check on `target`: one request per materialization, decided in Slack, by a signed link,
    the CLI or the ops API (M-of-N, four eyes, escalation, expiry that fails closed), then `on_approval` runs once."""

    def spec(self, settings: Settings, source: str = "") -> GateSpec:
        return resolve_gate(self, settings, source=source)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        # The settings the code location is being built with (runtime_ops.definitions), as its pipelines read them.
        settings = LOADING_SETTINGS.get() or get_settings()
        return approval_gate_defs(self.spec(settings, str(Path(context.path) / "defs.yaml")), settings)


def approval_gate(**attributes: Any) -> dg.Definitions:
    """The gate for projects that write their definitions in code: the same attributes as the YAML, e.g.
    `approval_gate(target="scoring/ticket_labels", evidence=["accuracy"], on_approval={"job": "publish_job"})`."""
    settings = get_settings()
    return approval_gate_defs(ApprovalGate.model_validate(attributes).spec(settings), settings)
