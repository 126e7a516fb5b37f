"""The promotion step of a pipeline's `production_model` asset: re-verify the decision for the exact candidate digest
(`approvals/requests.py`), then run the promotion saga (`models/promotion_saga.py`) under the promotion lock.

The saga, the serving index and the locks are imported when a promotion runs (numpy and the vector stores stay out
of the code location's load).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from runtime_ops.approvals.gate import PromotionRefused
from runtime_ops.approvals.lifecycle_gate import lifecycle_text, ready_to_promote
from runtime_ops.approvals.requests import verify_promotion
from runtime_ops.labels import version_label
from runtime_ops.locks.base import LockError
from runtime_ops.locks.promotion import promotion_lease
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.retries import retry_wait
from runtime_ops.saga.engine import CompensationFailed, SagaFailed, plan, run
from runtime_ops.serving.vector_store import pipeline_vectors
from runtime_ops.store import StateStore
from runtime_ops.tags import APPROVAL_TAG, PRODUCTION_ALIAS

if TYPE_CHECKING:
    from runtime_ops.locks.base import Locker


class PromotionConfig(dg.Config):
    approval_id: str | None = None
    dry_run: bool = False  # log the transitions the promotion would make; change nothing


PROMOTION_RETRY_CAP_S = 30.0


def gate_waits_in_this_run(context: dg.AssetExecutionContext, spec: PipelineSpec) -> bool:
    """Whether this run's own human_approval check found the candidate waiting for a person (a run that asked
    the gate, like train_job); a run that selected production_model without the check gets a refusal instead."""
    key = dg.AssetCheckKey(dg.AssetKey(spec.asset_path("evaluation_report")), "human_approval")
    records = context.instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    if not records or records[0].run_id != context.run_id:
        return False
    evaluation = records[0].event.asset_check_evaluation if records[0].event else None
    return evaluation is not None and not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN


def promote(
    context: dg.AssetExecutionContext, config: PromotionConfig, store: StateStore, locker: Locker, spec: PipelineSpec
) -> dg.MaterializeResult | None:
    """The promotion saga; None when this run's gate found the candidate waiting for a person (nothing to do
    until the decision), a one-line `dg.Failure` when promotion is refused."""
    # numpy: kept out of the code location's load
    from runtime_ops.models.promotion_saga import StoreJournal, backfill_refusal, promotion_steps, saga_id

    approval_id = config.approval_id or context.run.tags.get(APPROVAL_TAG)
    try:
        version, request = verify_promotion(store.evaluations, store.requests, store.rollouts, approval_id=approval_id)
    except PromotionRefused as exc:
        if exc.status == "pending" and approval_id is None and gate_waits_in_this_run(context, spec):
            production = store.registry.alias(PRODUCTION_ALIAS)
            context.log.info(
                f"production stays at {version_label(production)}: {str(exc).removeprefix('refusing to promote: ')}. "
                "The approvals sensor launches the promotion once it is approved."
            )
            return None
        # A refusal is final for this run (a new decision launches a new one): one line, never retried.
        raise dg.Failure(str(exc), allow_retries=False) from None
    if not config.dry_run:
        # The lifecycle decides who launches: the training run only what a policy approved and no ramp holds; a
        # person's approval and a ramp's end are the approvals sensor's (its promotion run carries the approval id).
        launched = approval_id is not None
        actor = f"run:{context.run_id}"
        held = ready_to_promote(store, spec.rollout, request, actor=actor, by_training_run=not launched)
        if held is not None:
            if not launched:
                production = store.registry.alias(PRODUCTION_ALIAS)
                context.log.info(f"production stays at {version_label(production)}: {held}")
                return None
            raise dg.Failure(f"refusing to promote: {held}", allow_retries=False)
    previous = store.registry.alias(PRODUCTION_ALIAS)
    vectors = pipeline_vectors(spec)
    refusal = backfill_refusal(store.indexes, vectors, version)
    if refusal is not None:
        again = f"materialize production_model with approval {request['id']}"
        raise dg.Failure(f"{refusal} ({again})", allow_retries=False)
    if config.dry_run:
        steps = promotion_steps(store, vectors, version=version, request=request, lease=None, run_id=context.run_id)
        lines = plan(steps, {})
        for line in lines:
            context.log.info(f"dry run: {line}")
        return dg.MaterializeResult(
            metadata={
                "dry_run": True,
                "plan": dg.MetadataValue.md("\n".join(f"- {x}" for x in lines)),
                "version": dg.MetadataValue.int(previous or 0),
            }
        )
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    try:
        with promotion_lease(locker, store.pipeline) as lease:
            steps = promotion_steps(
                store,
                vectors,
                version=version,
                request=request,
                lease=lease,
                run_id=context.run_id,
                log=context.log.info,
            )
            outcome = run(
                saga_id(request), steps, {}, StoreJournal(store.sagas, context.run_id), on_event=context.log.info
            )
    except (LockError, SagaFailed) as exc:
        # Fail closed; retry with capped exponential backoff (Dagster's own backoff has no cap).
        wait = retry_wait(context.retry_number, PROMOTION_RETRY_CAP_S)
        raise dg.RetryRequested(max_retries=6, seconds_to_wait=wait) from exc
    except CompensationFailed as exc:
        raise dg.Failure(f"promotion needs an operator: {exc}", allow_retries=False) from None
    model = store.registry.get_model(version)
    assert model is not None
    return dg.MaterializeResult(
        metadata={
            "version": dg.MetadataValue.int(version),
            "previous_version": dg.MetadataValue.int(previous or 0),
            "digest": model["digest"],
            "approval_id": request["id"],
            "approved_by": request["decided_by"] or "policy",
            "approval_kind": request["kind"],
            "lifecycle": lifecycle_text(store, request["id"]) or "-",
            "saga": outcome.saga_id,
            "fence": dg.MetadataValue.int(lease.fence),
        },
        data_version=dg.DataVersion(model["digest"][:16]),
    )
