"""A pipeline's query log retention: `<pipeline>__query_log_retention_job`, daily at 04:30 UTC by its schedule.

One op deletes the pipeline's query records older than `queries.retain` (defs.yaml, default 30 days) with their shown
items and feedback, a bounded batch per transaction (`runtime_ops.store.serving.query_log.QueryLog.delete_before`),
and reports how many it deleted. A separate job rather than a step of the serving jobs: it touches none of their
assets or aliases, so it needs no lifecycle pool and never waits for a promotion.
"""

import dagster as dg

from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import io_retry
from runtime_ops.store.engine import utcnow

RETENTION_CRON = "30 4 * * *"


def build_query_log_retention(spec: PipelineSpec) -> tuple[dg.JobDefinition, dg.ScheduleDefinition]:
    @dg.op(
        name=spec.qualified("delete_old_queries"),
        retry_policy=io_retry(spec.retry_delay_s),
        description=f"Delete query records older than queries.retain ({spec.queries.retain}) with their shown items "
        "and feedback, in bounded batches.",
    )
    @observed
    def delete_old_queries(context: dg.OpExecutionContext, state: StateStoreResource) -> int:
        cutoff = utcnow() - spec.queries.retain
        deleted = state.store().scoped(spec.name).query_log.delete_before(cutoff)
        context.log.info(f"deleted {deleted} query record(s) of {spec.name} from before {cutoff.isoformat()}")
        context.add_output_metadata({"deleted": deleted, "cutoff": cutoff.isoformat()})
        return deleted

    @dg.job(
        name=spec.qualified("query_log_retention_job"),
        tags={**spec.tags, "dagster/max_runtime": "3600"},
        description="Delete query log records (and their items and feedback) older than the pipeline's queries.retain.",
    )
    def query_log_retention_job() -> None:
        delete_old_queries()

    schedule = dg.ScheduleDefinition(
        name=spec.qualified("query_log_retention_schedule"),
        job=query_log_retention_job,
        cron_schedule=RETENTION_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Enforce the query log's retention (queries.retain) every day.",
    )
    return query_log_retention_job, schedule
