"""Periodic work: a nightly retrain and a regression evaluation every six hours."""

import dagster as dg

from runtime_ops.jobs import train_job
from runtime_ops.models.regression import regression_job

retrain_schedule = dg.ScheduleDefinition(
    name="retrain_schedule",
    job=train_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Retrain nightly even when no document landed (the gate still decides whether it is promoted).",
)

regression_schedule = dg.ScheduleDefinition(
    name="regression_schedule",
    job=regression_job,
    cron_schedule="0 */6 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Re-evaluate the production model on the current corpus every six hours.",
)
