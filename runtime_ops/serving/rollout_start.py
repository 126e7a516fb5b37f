"""Starting a rollout beside an approval request (glue: state store + vector store; no Dagster).

When the gate opens a request for a person and the pipeline declares a rollout mode, the candidate's vector index
is made ready with `ensure_index` (the function promotion uses; it never touches the `retrieval_index` alias, whose
one writer stays `serving/index_swap.py`), then the rollout starts. A first model has no production to compare
with: nothing starts. A rollout beside an older request of the pipeline is stopped first (superseded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_ops.labels import version_label
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.store import StateStore
from runtime_ops.tags import PRODUCTION_ALIAS
from runtime_ops.vectors.base import VectorStore

GATE_ACTOR = "gate"


def start_rollout(
    store: StateStore,
    spec: PipelineSpec,
    vectors: VectorStore,
    request: dict[str, Any],
    *,
    run_id: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> str:
    """Start (or find) the rollout beside the pending `request`; what happened, in words. For an approved request of
    a pipeline that ramps, only the candidate's index is made ready (its ramp serves from it)."""
    # numpy: kept out of the code location's load
    from runtime_ops.serving.vector_index import ensure_index

    plan = spec.rollout
    if not plan.enabled:
        return "rollout: off (rollout.mode)"
    version = int(request["candidate_version"])
    production = store.registry.alias(PRODUCTION_ALIAS)
    if production is None:
        return "rollout: none (a first model has no production to compare with)"
    beside = store.rollouts.for_request(request["id"])
    if beside is not None:  # a check run again (a retry, a re-materialization) does not start a second one
        how = "active" if beside["status"] == "active" else f"{beside['status']}: {beside['reason']}"
        return f"rollout #{beside['id']}: {beside['mode']} at {beside['share']:g}, {how}"
    active = store.rollouts.active()
    # Minutes for a new model: the candidate's index is filled from the whole corpus (resumable), or synced.
    index = ensure_index(store, vectors, version, log=log, run_id=run_id)
    current = store.requests.get_request(request["id"])
    if current is not None and current["status"] == "approved" and plan.ramps:
        # Approved already (by its policy, or a person within seconds): no comparison beside it; its ramp starts on
        # this index once the approvals sensor sees it ready.
        return f"rollout: none beside approved request {request['id']}; index #{index.index_id} is ready for its ramp"
    if current is None or current["status"] != "pending" or store.registry.alias(PRODUCTION_ALIAS) != production:
        return f"rollout: not started (request {request['id']} was decided or production moved meanwhile)"
    if active is not None:
        store.rollouts.stop(
            reason=f"superseded by candidate {version_label(version)} (request {request['id']})",
            actor=GATE_ACTOR,
            approval_id=active["approval_id"],
        )
    started = store.rollouts.start(
        approval_id=request["id"],
        candidate_version=version,
        candidate_index_id=index.index_id,
        production_version=production,
        mode=plan.mode,
        share=plan.share,
        max_duration=plan.max_duration,
        actor=GATE_ACTOR,
    )
    message = (
        f"rollout #{started['id']}: {plan.mode} of candidate {version_label(version)} (index #{index.index_id}) "
        f"against production {version_label(production)} at {plan.share:g} of traffic until "
        f"{started['ends_at']:%Y-%m-%d %H:%M} UTC"
    )
    log(message)
    return message
