"""Asking the candidate lifecycle (`lifecycle/machine.py`, written by `store.lifecycle`) for the moves that lead to
production: who may launch a promotion, and a person's explicit skip of the ramp. Used alike by the training run's
`production_model`, the approvals sensor and the CLI, so no path promotes a candidate the machine would not.
No Dagster here.
"""

from __future__ import annotations

from typing import Any

from runtime_ops.labels import version_label
from runtime_ops.lifecycle.machine import (
    APPROVED,
    PROMOTED,
    PROMOTING,
    Facts,
    TransitionRefused,
    describe,
)
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.store import StateStore
from runtime_ops.store.approvals.lifecycle import position_of
from runtime_ops.store.serving.rollouts import ACTIVE
from runtime_ops.tags import PRODUCTION_ALIAS

SENSOR_ACTOR = "sensor:approvals"


def by_person(request: dict[str, Any]) -> bool:
    """A person decided the request (a policy, online or offline, is not a person)."""
    decided = str(request.get("decided_by") or "")
    return request.get("kind") == "human" and not decided.startswith("policy")


def facts_for(
    store: StateStore,
    plan: RolloutSpec,
    request: dict[str, Any],
    *,
    by_training_run: bool = False,
    person: bool = False,
) -> Facts:
    """The facts a guard reads: the declared ramp, a first model (no production yet), who decided and who asks."""
    return Facts(
        ramp_stages=len(plan.ramp) if plan.ramps else 0,
        first_model=store.registry.alias(PRODUCTION_ALIAS) is None,
        by_person=person or by_person(request),
        by_training_run=by_training_run,
    )


def lifecycle_text(store: StateStore, approval_id: str | None) -> str | None:
    """The candidate's lifecycle state in words ("ramping (stage 2)"), None when its request has no lifecycle."""
    row = store.lifecycle.get(approval_id) if approval_id else None
    return describe(position_of(row)) if row is not None else None


def ready_to_promote(
    store: StateStore, plan: RolloutSpec, request: dict[str, Any], *, actor: str, by_training_run: bool
) -> str | None:
    """None when the request's candidate may be promoted now (moved to `promoting` here if it may be launched by
    `actor`), else why not, in words. A request with no lifecycle (opened before it existed, or not a model
    promotion) is left to the decision alone."""
    row = store.lifecycle.get(request["id"])
    if row is None:
        return None
    state = row["state"]
    if state in (PROMOTING, PROMOTED):
        return None
    candidate = version_label(int(row["candidate_version"]))
    if state != APPROVED:
        return f"candidate {candidate} is {describe(position_of(row))}, not ready for production"
    facts = facts_for(store, plan, request, by_training_run=by_training_run)
    try:
        store.lifecycle.move_to(
            request["id"], "launch", actor=actor, reason=f"promotion of {candidate} launched", facts=facts
        )
    except TransitionRefused as exc:
        return str(exc)
    return None


def skip_ramp(store: StateStore, plan: RolloutSpec, request: dict[str, Any], *, actor: str, reason: str) -> str:
    """A person's explicit decision to promote without (the rest of) the ramp: the active stage stops and the
    candidate moves to `promoting`, in one transaction, audited as a skip. TransitionRefused when it may not."""
    facts = facts_for(store, plan, request, person=True)
    why = f"ramp skipped by {actor}: {reason}"

    def move(conn: Any) -> None:
        store.lifecycle.move_in(conn, request["id"], "skip_ramp", actor=actor, reason=why, facts=facts)

    stages = store.rollouts.stages(request["id"])
    if stages and stages[-1]["status"] == ACTIVE:
        store.rollouts.stop(reason=why, actor=actor, approval_id=request["id"], then=move)
    else:
        with store.tx() as conn:
            move(conn)
    return why
