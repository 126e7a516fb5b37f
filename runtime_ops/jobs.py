"""Asset jobs: what each trigger launches."""

import dagster as dg

from runtime_ops.documents.assets import document_chunks, raw_documents
from runtime_ops.documents.partitions import landing_batches
from runtime_ops.models.assets import embedding_model, evaluation_report, production_model
from runtime_ops.models.checks import human_approval, meets_policy
from runtime_ops.observability.steps import RUN_LOGGER_CONFIG
from runtime_ops.retries import GATED_RUN_TAGS
from runtime_ops.serving.assets import document_embeddings, rag_answers, retrieval_index

_SERVING = dg.AssetSelection.assets(document_embeddings, retrieval_index, rag_answers)

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.assets(raw_documents, document_chunks),
    partitions_def=landing_batches,
    tags={"dagster/max_runtime": "3600"},
    config=RUN_LOGGER_CONFIG,
    description="Parse and chunk one landing batch.",
)

# Train, evaluate, gate and (when the gate passes) promote and re-index, in one run. A failing blocking
# check skips production_model and everything after it in this run.
train_job = dg.define_asset_job(
    "train_job",
    selection=dg.AssetSelection.assets(embedding_model, evaluation_report, production_model) | _SERVING,
    tags={**GATED_RUN_TAGS, "dagster/max_runtime": "3600"},
    config=RUN_LOGGER_CONFIG,
    description="Retrain the embedder, evaluate it against production, and promote it if the gate passes.",
)

# Launched by the approvals sensor after a human decision (run key = approval id).
promotion_job = dg.define_asset_job(
    "promotion_job",
    selection=dg.AssetSelection.checks(meets_policy, human_approval)
    | dg.AssetSelection.assets(production_model)
    | _SERVING,
    tags={**GATED_RUN_TAGS, "dagster/max_runtime": "3600"},
    config=RUN_LOGGER_CONFIG,
    description="Promote an approved candidate, then rebuild embeddings, the index and the answers.",
)

index_job = dg.define_asset_job(
    "index_job",
    selection=_SERVING,
    tags={"dagster/max_runtime": "3600"},
    config=RUN_LOGGER_CONFIG,
    description="Bring embeddings, the retrieval index and the answers up to date with the production model.",
)

ALL_JOBS = [ingest_job, train_job, promotion_job, index_job]
