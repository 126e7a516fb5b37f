"""The one Definitions object of the runtime_ops code location (dagster dev, dg, gRPC code server)."""

import dagster as dg

from runtime_ops.alerts.jobs import ALERT_JOBS
from runtime_ops.alerts.sensors import alert_rules_resource, alert_sensor
from runtime_ops.approvals.sensors import approvals_sensor
from runtime_ops.automation import automation_sensor
from runtime_ops.documents.assets import document_chunks, raw_documents
from runtime_ops.documents.sensors import landing_sensor
from runtime_ops.jobs import ALL_JOBS
from runtime_ops.models.assets import embedding_model, evaluation_report, production_model
from runtime_ops.models.checks import human_approval, meets_policy
from runtime_ops.models.regression import no_regression, production_evaluation, regression_job
from runtime_ops.models.sensors import corpus_sensor
from runtime_ops.observability.logs import configure_logging
from runtime_ops.observability.steps import default_for_unconfigured_runs, runtime_ops_logger
from runtime_ops.resources.landing_resource import LandingResource
from runtime_ops.resources.state import ApprovalsResource, GatePolicyResource, LocksResource, StateStoreResource
from runtime_ops.schedules import regression_schedule, retrain_schedule
from runtime_ops.serving.assets import document_embeddings, rag_answers, retrieval_index
from runtime_ops.settings import Settings, get_settings


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    return {
        "state": StateStoreResource(database_url=settings.resolved_database_url),
        "locks": LocksResource(redis_url=settings.redis_url, database_url=settings.resolved_database_url),
        "landing": LandingResource(
            uri=settings.resolved_landing,
            endpoint_url=settings.aws_endpoint_url,
            sqs_queue_url=settings.sqs_queue_url,
            batch_max_objects=settings.batch_max_objects,
            scan_max_keys=settings.scan_max_keys,
            max_document_bytes=settings.max_document_bytes,
        ),
        "approvals": ApprovalsResource(
            approvers=list(settings.approvers),
            escalation_approvers=list(settings.escalation_approvers),
            required_approvals=settings.required_approvals,
            escalate_after_seconds=settings.escalate_after.total_seconds() if settings.escalate_after else None,
            expire_after_seconds=settings.expire_after.total_seconds() if settings.expire_after else None,
            public_url=settings.public_url,
            dagster_url=settings.dagster_url,
            slack_channel=settings.slack_approval_channel,
            slack_api_url=settings.slack_api_url,
        ),
        "alert_rules": alert_rules_resource(str(settings.resolved_alert_rules)),
        "gate": GatePolicyResource(
            primary_metric=settings.primary_metric,
            auto_approve_margin=settings.auto_approve_margin,
            max_regression=settings.max_regression,
            golden_set=str(settings.resolved_golden_set),
        ),
    }


def build_definitions(settings: Settings | None = None) -> dg.Definitions:
    settings = settings or get_settings()
    # Every process that loads the code location (run workers, the daemon's sensors, the code server) writes
    # runtime_ops.* Python logs through the same formatter and redaction as the run logs.
    configure_logging(fmt=settings.log_format)
    default_for_unconfigured_runs()
    return dg.Definitions(
        assets=[
            raw_documents,
            document_chunks,
            embedding_model,
            evaluation_report,
            production_model,
            document_embeddings,
            retrieval_index,
            rag_answers,
            production_evaluation,
        ],
        asset_checks=[meets_policy, human_approval, no_regression],
        jobs=[*ALL_JOBS, regression_job, *ALERT_JOBS],
        schedules=[retrain_schedule, regression_schedule],
        sensors=[landing_sensor, corpus_sensor, approvals_sensor, alert_sensor, automation_sensor],
        resources=build_resources(settings),
        # Run logs as JSON lines (console lines in `make dev`); Dagster's event log (the UI) is unaffected.
        loggers={"console": runtime_ops_logger},
    )


defs = build_definitions()
