"""One pipeline's definitions, assembled from each domain's factory."""

from __future__ import annotations

import dagster as dg

from runtime_ops.alerts.jobs import build_alert_jobs
from runtime_ops.alerts.sensors import build_alert_sensor
from runtime_ops.approvals.sensors import build_approvals_sensor
from runtime_ops.documents.assets import build_document_assets
from runtime_ops.documents.sensors import build_landing_sensor
from runtime_ops.jobs import build_jobs
from runtime_ops.models.assets import build_gate_checks, build_model_assets, build_regression
from runtime_ops.models.sensors import build_corpus_sensor
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.schedules import build_schedules
from runtime_ops.serving.assets import build_serving_assets
from runtime_ops.serving.backfill import build_shadow_embeddings
from runtime_ops.serving.query_log_retention import build_query_log_retention


def build_pipeline_defs(spec: PipelineSpec) -> dg.Definitions:
    raw_documents, document_chunks = build_document_assets(spec)
    embedding_model, golden_questions, evaluation_report, production_model = build_model_assets(spec, document_chunks)
    serving = build_serving_assets(spec, document_chunks, production_model)
    production_evaluation, no_regression, regression_job = build_regression(spec, production_model)
    gate = build_gate_checks(spec, evaluation_report)
    assets = [
        raw_documents,
        document_chunks,
        embedding_model,
        golden_questions,
        evaluation_report,
        production_model,
        *serving,
        build_shadow_embeddings(spec, embedding_model),
    ]
    by_name = {a.key.path[-1]: a for a in assets}
    jobs = build_jobs(spec, by_name, gate)
    alert_jobs = build_alert_jobs(spec)
    retention_job, retention_schedule = build_query_log_retention(spec)
    return dg.Definitions(
        assets=[*assets, production_evaluation],
        asset_checks=[*gate, no_regression],
        jobs=[*jobs.all, regression_job, *alert_jobs, retention_job],
        schedules=[*build_schedules(spec, jobs.train, regression_job), retention_schedule],
        sensors=[
            build_landing_sensor(spec, jobs.ingest),
            build_corpus_sensor(spec, jobs.train, jobs.index),
            build_approvals_sensor(spec, jobs.promotion),
            build_alert_sensor(spec, [jobs.train, *alert_jobs]),
        ],
    )
