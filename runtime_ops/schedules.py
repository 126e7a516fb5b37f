"""A pipeline's periodic work: a retrain and a regression evaluation, on the crons of its defs.yaml."""

import dagster as dg

from runtime_ops.jobs import AssetJob
from runtime_ops.pipeline.spec import PipelineSpec


def build_schedules(spec: PipelineSpec, train_job: AssetJob, regression_job: AssetJob) -> list[dg.ScheduleDefinition]:
    schedules = []
    if spec.retrain_cron:
        schedules.append(
            dg.ScheduleDefinition(
                name=spec.qualified("retrain_schedule"),
                job=train_job,
                cron_schedule=spec.retrain_cron,
                execution_timezone="UTC",
                default_status=dg.DefaultScheduleStatus.RUNNING,
                description="Retrain even when no document landed (the gate still decides whether it is promoted).",
            )
        )
    if spec.regression_cron:
        schedules.append(
            dg.ScheduleDefinition(
                name=spec.qualified("regression_schedule"),
                job=regression_job,
                cron_schedule=spec.regression_cron,
                execution_timezone="UTC",
                default_status=dg.DefaultScheduleStatus.RUNNING,
                description="Re-evaluate the production model on the current corpus.",
            )
        )
    return schedules
