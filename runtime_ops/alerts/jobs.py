"""The remediation jobs the alert sensor launches besides train_job: rollback_job and reembed_job.

Each is one op over `alerts.rollback` / `alerts.reembed`; it records what it changed as a materialization of
the assets it moved (`production_model`, `document_embeddings`, `retrieval_index`), so the UI's lineage and the
declarative automation downstream (answers, regression evaluation) follow a remediation like a promotion. Both
ops hold the pipeline's lifecycle pool, as every step that can move its aliases does.
"""

from typing import Any

import dagster as dg

from runtime_ops.alerts.reembed import ReembedRefused, run_reembed
from runtime_ops.locks.base import LockError
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import GATED_RUN_TAGS, io_retry, retry_wait
from runtime_ops.saga.engine import CompensationFailed, SagaFailed
from runtime_ops.serving.vector_store import pipeline_vectors

RETRY_CAP_S = 30.0


class RollbackConfig(dg.Config):
    alert_id: int
    alert_key: str
    from_version: int
    to_version: int
    approval_id: str | None = None  # None: the rule pre-approved the rollback


def rollback(
    context: dg.OpExecutionContext, config: RollbackConfig, store: Any, locker: Any, spec: PipelineSpec
) -> None:
    # numpy: kept out of the code location's load
    from runtime_ops.alerts.rollback import RollbackRefused, run_rollback

    try:
        outcome = run_rollback(
            store,
            locker,
            pipeline_vectors(spec),
            alert_key=config.alert_key,
            alert_ref=f"alert-{config.alert_id}",
            from_version=config.from_version,
            to_version=config.to_version,
            approval_id=config.approval_id,
            run_id=context.run_id,
            log=context.log.info,
        )
    except RollbackRefused as exc:
        raise dg.Failure(str(exc), allow_retries=False) from None
    except (LockError, SagaFailed) as exc:
        # Fail closed and retry with capped exponential backoff, as the promotion does.
        wait = retry_wait(context.retry_number, RETRY_CAP_S)
        raise dg.RetryRequested(max_retries=6, seconds_to_wait=wait) from exc
    except CompensationFailed as exc:
        raise dg.Failure(f"rollback needs an operator: {exc}", allow_retries=False) from None
    context.log.info(outcome.message)
    if outcome.status == "done":
        context.log_event(
            dg.AssetMaterialization(
                asset_key=dg.AssetKey(spec.asset_path("production_model")),
                description=outcome.message,
                metadata={
                    "version": dg.MetadataValue.int(outcome.to_version),
                    "previous_version": dg.MetadataValue.int(outcome.from_version),
                    "rollback": True,
                    "alert": config.alert_key,
                    "approval_id": config.approval_id or "preapproved by rule",
                    "saga": outcome.saga_id,
                    "fence": dg.MetadataValue.int(outcome.fence),
                },
            )
        )
    if outcome.index_moved and outcome.index_id is not None:
        # Serving follows production in this run: answers downstream follow the rollback, not the next landing.
        context.log_event(
            dg.AssetMaterialization(
                asset_key=dg.AssetKey(spec.asset_path("retrieval_index")),
                description=f"serving the index of production v{outcome.to_version} after the rollback",
                metadata={
                    "index_id": dg.MetadataValue.int(outcome.index_id),
                    "model_version": dg.MetadataValue.int(outcome.to_version),
                    "rollback": True,
                    "alert": config.alert_key,
                    "fence": dg.MetadataValue.int(outcome.fence),
                },
            )
        )


class ReembedConfig(dg.Config):
    alert_id: int
    alert_key: str
    batch_id: str | None = None  # None: the whole corpus


def reembed(context: dg.OpExecutionContext, config: ReembedConfig, store: Any, locker: Any, spec: PipelineSpec) -> None:
    try:
        outcome = run_reembed(
            store,
            locker,
            pipeline_vectors(spec),
            batch_id=config.batch_id,
            run_id=context.run_id,
            log=context.log.info,
        )
    except ReembedRefused as exc:
        raise dg.Failure(str(exc), allow_retries=False) from None
    except LockError as exc:
        wait = retry_wait(context.retry_number, RETRY_CAP_S)
        raise dg.RetryRequested(max_retries=6, seconds_to_wait=wait) from exc
    common = {"alert": config.alert_key, "model_version": dg.MetadataValue.int(outcome.model_version)}
    context.log_event(
        dg.AssetMaterialization(
            asset_key=dg.AssetKey(spec.asset_path("document_embeddings")),
            description=outcome.message,
            metadata={
                **common,
                "scope": config.batch_id or "all",
                "dropped": dg.MetadataValue.int(outcome.dropped),
                "embedded_now": dg.MetadataValue.int(outcome.embedded),
            },
        )
    )
    if outcome.index_id is not None:
        context.log_event(
            dg.AssetMaterialization(
                asset_key=dg.AssetKey(spec.asset_path("retrieval_index")),
                description=outcome.message,
                metadata={
                    **common,
                    "index_id": dg.MetadataValue.int(outcome.index_id),
                    "swapped": outcome.index_swapped,
                    "fence": dg.MetadataValue.int(outcome.fence or 0),
                },
            )
        )


def build_alert_jobs(spec: PipelineSpec) -> list[dg.JobDefinition]:
    """The pipeline's rollback_job and reembed_job (launched by its alert sensor)."""

    @dg.op(
        name=spec.qualified("rollback_production"),
        pool=spec.lifecycle_pool,
        description="Roll `production` back to the previous version: the promotion saga under the promotion lock, "
        "every alias write fenced, and the serving index brought to production's before the lock is released; "
        "refuses when production moved since the alert fired or the approval does not match this exact rollback.",
    )
    @observed
    def rollback_production(
        context: dg.OpExecutionContext, config: RollbackConfig, state: StateStoreResource, locks: LocksResource
    ) -> None:
        rollback(context, config, state.store().scoped(spec.name), locks.locker(), spec)

    @dg.op(
        name=spec.qualified("reembed_embeddings"),
        retry_policy=io_retry(spec.retry_delay_s),
        pool=spec.lifecycle_pool,
        description="Drop and recompute the production model's vectors of one landing batch (or everything), then "
        "rebuild the retrieval index and swap it in under the promotion lock (fenced).",
    )
    @observed
    def reembed_embeddings(
        context: dg.OpExecutionContext, config: ReembedConfig, state: StateStoreResource, locks: LocksResource
    ) -> None:
        reembed(context, config, state.store().scoped(spec.name), locks.locker(), spec)

    @dg.job(
        name=spec.qualified("rollback_job"),
        tags={
            **GATED_RUN_TAGS,
            **spec.lifecycle_tags,
            "dagster/max_runtime": "3600",
            **spec.step_timeout_tags("rollback_job"),
        },
        description="Roll production back to its previous version (launched by the alert sensor).",
    )
    def rollback_job() -> None:
        rollback_production()

    @dg.job(
        name=spec.qualified("reembed_job"),
        tags={**spec.lifecycle_tags, "dagster/max_runtime": "3600", **spec.step_timeout_tags("reembed_job")},
        description="Re-embed one landing batch or the whole corpus with the production model and swap in the "
        "rebuilt index (launched by the alert sensor).",
    )
    def reembed_job() -> None:
        reembed_embeddings()

    return [rollback_job, reembed_job]
