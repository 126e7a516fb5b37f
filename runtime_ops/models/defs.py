"""A pipeline's model assets: the candidate, its evaluation against production, and the `production` alias."""

import dagster as dg

from runtime_ops.models.assets import (
    PromotionConfig,
    TrainConfig,
    evaluate_candidate,
    promote,
    train_candidate,
)
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.state import LocksResource, StateStoreResource
from runtime_ops.retries import IO_RETRY


def build_model_assets(spec: PipelineSpec, document_chunks: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        key=spec.asset_path("embedding_model"),
        deps=[document_chunks],
        group_name=spec.name,
        kinds={"scikitlearn"},
        tags={"domain": "models"},
        retry_policy=IO_RETRY,
        description="A candidate embedding model (TF-IDF + truncated SVD, i.e. LSA) trained on every current "
        "chunk; versioned in the registry by the digest of its bytes, so retraining on the same corpus is a no-op.",
    )
    @observed
    def embedding_model(
        context: dg.AssetExecutionContext, config: TrainConfig, state: StateStoreResource
    ) -> dg.MaterializeResult:
        return train_candidate(context, config, state.store().scoped(spec.name), spec)

    @dg.asset(
        key=spec.asset_path("evaluation_report"),
        deps=[embedding_model],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        retry_policy=IO_RETRY,
        description="The candidate against the production model on the golden question set: recall@k, MRR, "
        "nDCG@k as numeric metadata (plotted over versions in the UI), a markdown comparison and the verdict.",
    )
    @observed
    def evaluation_report(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return evaluate_candidate(context, state.store().scoped(spec.name), spec)

    @dg.asset(
        key=spec.asset_path("production_model"),
        deps=[evaluation_report],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        description="The `production` alias. Promotion re-verifies the decision for the exact candidate digest "
        "itself (so a run that selects this asset without the human_approval check still refuses), then runs as "
        "a saga under the promotion lock: fenced alias move, index swap, announcement; compensated on failure.",
    )
    @observed
    def production_model(
        context: dg.AssetExecutionContext, config: PromotionConfig, state: StateStoreResource, locks: LocksResource
    ) -> dg.MaterializeResult:
        return promote(context, config, state.store().scoped(spec.name), locks.locker(), spec)

    return [embedding_model, evaluation_report, production_model]
