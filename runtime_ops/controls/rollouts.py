"""What an operator sees and does with rollouts and production: list and show rollouts (with their live evidence and
the candidate's lifecycle), stop one, and roll production back to a version of their choosing. The CLI
(`runtime-ops rollouts`, `runtime-ops rollback`) and the ops API (`/api/rollouts`, `/api/rollback`) both call these,
with an operator's authenticated identity; every stop and rollback is a lifecycle move with its audit record. No
Dagster here.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime_ops.approvals.lifecycle_gate import facts_for, lifecycle_text
from runtime_ops.approvals.stage_evidence import StageRule, stage_online_evidence
from runtime_ops.labels import version_label
from runtime_ops.lifecycle.machine import TransitionRefused
from runtime_ops.locks.base import Locker
from runtime_ops.online.evidence import EvidenceLimits, online_evidence
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore
from runtime_ops.store.serving.indexes import DROPPED
from runtime_ops.store.serving.rollouts import ACTIVE
from runtime_ops.tags import PRODUCTION_ALIAS
from runtime_ops.vectors.base import VectorStore

if TYPE_CHECKING:
    from runtime_ops.alerts.rollback import RollbackOutcome

ROLLOUT_FIELDS = (
    "id",
    "pipeline",
    "approval_id",
    "mode",
    "share",
    "stage",
    "status",
    "reason",
    "candidate_version",
    "candidate_index_id",
    "production_version",
    "started_at",
    "ends_at",
    "ended_at",
    "actor",
)


class OperatorRefusal(ValueError):
    """What the operator asked for cannot be done; the message says why and what to do instead. `status` is the
    HTTP status the API answers with."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


def rollout_view(store: StateStore, row: dict[str, Any]) -> dict[str, Any]:
    """A rollout as every channel shows it: its row's public fields and its candidate's lifecycle state."""
    return {**{k: row.get(k) for k in ROLLOUT_FIELDS}, "lifecycle": lifecycle_text(store, row.get("approval_id"))}


def list_rollouts(store: StateStore, limit: int = 20) -> list[dict[str, Any]]:
    """The scope's rollouts, newest first (every pipeline's on an unscoped store)."""
    return [rollout_view(store, row) for row in store.rollouts.history(limit)]


def show_rollout(
    store: StateStore, rollout_id: int, plan: RolloutSpec, online: OnlinePolicy | None = None
) -> dict[str, Any]:
    """One rollout with its live evidence as it is judged (a ramp stage by the ramp's rule, the rollout beside a
    pending request by the gate's, both under `gate.online`'s limits) and, for a ramp, its request's stages;
    OperatorRefusal(404) if unknown."""
    row = store.rollouts.get(rollout_id)
    if row is None:
        raise OperatorRefusal(f"no rollout #{rollout_id}; list them with: runtime-ops rollouts list", 404)
    online = online or OnlinePolicy()
    stages = store.rollouts.stages(row["approval_id"]) if row.get("approval_id") else []
    at = next((i for i, s in enumerate(stages) if int(s["id"]) == rollout_id), None)
    if at is not None:
        found = stage_online_evidence(store, stages, at, StageRule.of(plan, online))
    else:
        limits = EvidenceLimits(max_key_share=online.max_key_share, max_session_share=online.max_session_share)
        inputs = store.query_log.online_inputs(rollout_id)
        found = online_evidence(inputs, mode=str(row["mode"]), min_queries=online.min_queries, limits=limits)
    return {
        **rollout_view(store, row),
        "evidence": found.to_dict(),
        "stages": [{k: s.get(k) for k in ROLLOUT_FIELDS} for s in stages],
    }


def stop_rollout(store: StateStore, rollout_id: int, plan: RolloutSpec, *, actor: str, reason: str) -> dict[str, Any]:
    """Stop an active rollout as operator `actor`. A ramp stage's stop halts its candidate (a person may still skip
    the rest of the ramp, or the next candidate supersedes it), in the same transaction."""
    row = store.rollouts.get(rollout_id)
    if row is None:
        raise OperatorRefusal(f"no rollout #{rollout_id}; list them with: runtime-ops rollouts list", 404)
    if row["status"] != ACTIVE:
        raise OperatorRefusal(f"rollout #{rollout_id} is already {row['status']} ({row.get('reason') or 'no reason'})")
    scoped = store.scoped(str(row["pipeline"]))
    why = f"stopped by {actor}: {reason}"
    approval_id = row.get("approval_id")
    request = scoped.requests.get_request(approval_id) if approval_id else None

    # Read before the stop's write transaction: on SQLite a read on another connection inside it waits on it.
    facts = facts_for(scoped, plan, request) if request is not None else None

    def halt(conn: Any) -> None:
        if row.get("stage") is not None and request is not None and facts is not None:
            scoped.lifecycle.move_in(conn, request["id"], "halt", actor=actor, reason=why, facts=facts)

    try:
        ended = scoped.rollouts.stop(reason=why, actor=actor, approval_id=approval_id, then=halt)
    except TransitionRefused as exc:
        raise OperatorRefusal(str(exc)) from None
    if ended is None:
        raise OperatorRefusal(f"rollout #{rollout_id} ended meanwhile; show it again")
    return rollout_view(scoped, scoped.rollouts.get(rollout_id) or row)


@dataclass(frozen=True)
class RollbackPlan:
    from_version: int
    to_version: int
    index_id: int


def plan_manual_rollback(store: StateStore, to_version: int) -> RollbackPlan:
    """Check a rollback of the (scoped) pipeline to `to_version` can be done now; OperatorRefusal saying why not."""
    current = store.registry.alias(PRODUCTION_ALIAS)
    if current is None:
        raise OperatorRefusal(f"{store.pipeline} has no production model: nothing to roll back")
    if current == to_version:
        raise OperatorRefusal(f"{store.pipeline}'s production is already {version_label(to_version)}")
    if store.registry.get_model(to_version) is None:
        raise OperatorRefusal(f"{store.pipeline} has no model {version_label(to_version)}", 404)
    served = {h["new_target"] for h in store.registry.alias_history(PRODUCTION_ALIAS)}
    if to_version not in served:
        # A rollback returns to what production was; anything else is a candidate, which only the gate promotes.
        raise OperatorRefusal(
            f"{version_label(to_version)} was never {store.pipeline}'s production model, so it is no rollback target "
            f"(it was production at: {', '.join(version_label(v) for v in sorted(served)) or 'none'}); a candidate "
            "reaches production only through the gate"
        )
    live = [i for i in store.indexes.list_indexes(include_dropped=True) if i["model_version"] == to_version]
    kept = [i for i in live if i["status"] != DROPPED]
    if not kept:
        gone = "was dropped by retention" if live else "was never built"
        raise OperatorRefusal(
            f"{version_label(to_version)}'s vector index {gone}, so it cannot serve at once. Rebuild it first: "
            f"backfill {store.pipeline}/shadow_embeddings (all partitions) with the tag "
            f"runtime_ops/model_version={to_version} in the Dagster UI, then roll back again",
        )
    return RollbackPlan(int(current), to_version, int(kept[-1]["id"]))


def manual_rollback(
    store: StateStore,
    locker: Locker,
    vectors: VectorStore,
    *,
    to_version: int,
    actor: str,
    reason: str,
    channel: str,
) -> RollbackOutcome:
    """Roll the (scoped) pipeline's production back to `to_version` as operator `actor`: the decision is audited,
    then the promotion saga moves production back under the promotion lock (its candidate in production ends
    `rolled_back` in the alias write's transaction)."""
    # numpy (the promotion saga): kept out of the CLI's start
    from runtime_ops.alerts.rollback import RollbackRefused, run_rollback

    plan = plan_manual_rollback(store, to_version)
    ref = f"manual-{secrets.token_hex(4)}"
    store.audit_log.append(
        event="rollback_requested",
        actor=actor,
        channel=channel,
        outcome="accepted",
        detail={
            "pipeline": store.pipeline,
            "from_version": plan.from_version,
            "to_version": to_version,
            "reason": reason,
            "ref": ref,
        },
    )
    try:
        return run_rollback(
            store,
            locker,
            vectors,
            alert_key=ref,
            alert_ref=ref,
            from_version=plan.from_version,
            to_version=to_version,
            approval_id=None,
            run_id=None,
            decider=actor,
        )
    except RollbackRefused as exc:
        raise OperatorRefusal(str(exc)) from None
