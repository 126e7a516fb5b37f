"""A pipeline's asset jobs: what each of its triggers launches."""

from dataclasses import dataclass

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from runtime_ops.observability.steps import RUN_LOGGER_CONFIG
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.retries import GATED_RUN_TAGS

# What `dg.define_asset_job` returns (not exported by name from `dagster`).
AssetJob = UnresolvedAssetJobDefinition


@dataclass(frozen=True)
class PipelineJobs:
    ingest: AssetJob
    train: AssetJob
    promotion: AssetJob
    index: AssetJob

    @property
    def all(self) -> list[AssetJob]:
        return [self.ingest, self.train, self.promotion, self.index]


def build_jobs(
    spec: PipelineSpec, assets: dict[str, dg.AssetsDefinition], checks: list[dg.AssetChecksDefinition]
) -> PipelineJobs:
    serving = dg.AssetSelection.assets(assets["document_embeddings"], assets["retrieval_index"], assets["rag_answers"])
    runtime = {"dagster/max_runtime": "3600"}
    return PipelineJobs(
        ingest=dg.define_asset_job(
            spec.qualified("ingest_job"),
            selection=dg.AssetSelection.assets(assets["raw_documents"], assets["document_chunks"]),
            partitions_def=assets["raw_documents"].partitions_def,
            tags={**spec.ingest_tags, **runtime, **spec.step_timeout_tags("ingest_job")},
            config=RUN_LOGGER_CONFIG,
            description="Parse and chunk one landing batch.",
        ),
        # Train, evaluate, gate and (when the gate passes) promote and re-index, in one run. A candidate below
        # the policy fails meets_policy (blocking: nothing after it runs); one that waits for a person leaves
        # production_model unmaterialized and the run succeeds (the promotion_job follows the decision).
        train=dg.define_asset_job(
            spec.qualified("train_job"),
            selection=dg.AssetSelection.assets(
                assets["embedding_model"],
                assets["golden_questions"],
                assets["evaluation_report"],
                assets["production_model"],
            )
            | serving,
            tags={**GATED_RUN_TAGS, **spec.lifecycle_tags, **runtime, **spec.step_timeout_tags("train_job")},
            config=RUN_LOGGER_CONFIG,
            description="Retrain the embedder, evaluate it against production, and promote it if the gate passes.",
        ),
        # Launched by the approvals sensor after a human decision (run key = approval id).
        promotion=dg.define_asset_job(
            spec.qualified("promotion_job"),
            selection=dg.AssetSelection.checks(*checks)
            | dg.AssetSelection.assets(assets["production_model"])
            | serving,
            tags={**GATED_RUN_TAGS, **spec.lifecycle_tags, **runtime, **spec.step_timeout_tags("promotion_job")},
            config=RUN_LOGGER_CONFIG,
            description="Promote an approved candidate, then rebuild embeddings, the index and the answers.",
        ),
        index=dg.define_asset_job(
            spec.qualified("index_job"),
            selection=serving,
            tags={**spec.lifecycle_tags, **runtime, **spec.step_timeout_tags("index_job")},
            config=RUN_LOGGER_CONFIG,
            description="Bring embeddings, the retrieval index and the answers up to date with the production model.",
        ),
    )
