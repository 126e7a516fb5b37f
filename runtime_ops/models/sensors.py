"""The corpus sensor: newly ingested documents lead to a retrain."""

import dagster as dg

from runtime_ops.jobs import AssetJob
from runtime_ops.pipeline.spec import LIFECYCLE_TAG, PipelineSpec
from runtime_ops.resources.state import StateStoreResource

ACTIVE_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def active_lifecycle_run(instance: dg.DagsterInstance, pipeline: str) -> str | None:
    """A queued or running lifecycle run (train, promotion, index, rollback, re-embed) of this pipeline."""
    records = instance.get_run_records(dg.RunsFilter(tags={LIFECYCLE_TAG: pipeline}, statuses=ACTIVE_STATUSES), limit=1)
    return records[0].dagster_run.run_id if records else None


def build_corpus_sensor(spec: PipelineSpec, train_job: AssetJob) -> dg.SensorDefinition:
    @dg.sensor(
        name=spec.qualified("corpus_sensor"),
        jobs=[train_job],
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="When ingestion advances the corpus past the newest model, retrain (train_job); one lifecycle "
        "run at a time. New documents reach embeddings and the index through declarative automation.",
    )
    def corpus_sensor(context: dg.SensorEvaluationContext, state: StateStoreResource) -> dg.RunRequest | dg.SkipReason:
        store = state.store().scoped(spec.name)
        revision = store.ledger.corpus_revision()
        if revision == 0:
            return dg.SkipReason("no ingested documents yet")
        running = active_lifecycle_run(context.instance, spec.name)
        if running:
            return dg.SkipReason(f"waiting for lifecycle run {running} to finish")
        latest = store.registry.latest_model()
        if latest is None or latest["corpus_revision"] < revision:
            return dg.RunRequest(job_name=train_job.name, run_key=f"train-rev{revision}")
        return dg.SkipReason(f"the newest model is trained on corpus revision {revision}")

    return corpus_sensor
