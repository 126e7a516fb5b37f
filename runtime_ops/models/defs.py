"""A pipeline's model assets: the candidate, its evaluation against production, and the `production` alias."""

from collections.abc import Iterator

import dagster as dg

from runtime_ops.models.assets import PromotionConfig, TrainConfig, promote, train_candidate
from runtime_ops.models.evaluate import evaluate_candidate, question_set
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import IO_RETRY


def build_model_assets(spec: PipelineSpec, document_chunks: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        key=spec.asset_path("embedding_model"),
        deps=[document_chunks],
        group_name=spec.name,
        kinds={"scikitlearn" if spec.embedder.kind == "lsa" else "python"},
        tags={"domain": "models"},
        retry_policy=IO_RETRY,
        description=f"A candidate {spec.embedder.kind} embedding model: lsa is fitted on a bounded sample of the "
        "corpus, a pretrained model (openai endpoint, sentence-transformers) is registered by its identity; "
        "versioned by digest, so the same model twice is the same version.",
    )
    @observed
    def embedding_model(
        context: dg.AssetExecutionContext, config: TrainConfig, state: StateStoreResource
    ) -> dg.MaterializeResult:
        return train_candidate(context, config, state.store().scoped(spec.name), spec)

    @dg.asset(
        key=spec.asset_path("golden_questions"),
        deps=[document_chunks],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        retry_policy=IO_RETRY,
        description="The evaluation question set: the reviewed golden set's questions that apply to the corpus, "
        "topped up with questions generated from the corpus (offline, deterministic) up to evaluation.min_questions; "
        "each records its provenance; versioned by digest, so every report names the set it scored.",
    )
    @observed
    def golden_questions(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return question_set(context, state.store().scoped(spec.name), spec)

    @dg.asset(
        key=spec.asset_path("evaluation_report"),
        deps=[embedding_model, golden_questions],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        retry_policy=IO_RETRY,
        description="The candidate against the production model on the same held-out questions: recall@k, MRR, "
        "nDCG@k as numeric metadata (plotted over versions in the UI), the paired bootstrap interval of the "
        "difference, the questions whose results changed most, and the verdict.",
    )
    @observed
    def evaluation_report(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return evaluate_candidate(context, state.store().scoped(spec.name), spec)

    @observed
    def promotion_step(
        context: dg.AssetExecutionContext, config: PromotionConfig, state: StateStoreResource, locks: LocksResource
    ) -> dg.MaterializeResult | None:
        return promote(context, config, state.store().scoped(spec.name), locks.locker(), spec)

    @dg.asset(
        key=spec.asset_path("production_model"),
        deps=[evaluation_report],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        # Serialized with every other run that can move the pipeline's aliases (retrieval_index, rollback, ...).
        pool=spec.lifecycle_pool,
        # Not materialized while the candidate waits for a person (the run's human_approval check is pending):
        # the run succeeds, production and the assets after it stay as they are until the promotion run.
        output_required=False,
        description="The `production` alias. Promotion re-verifies the decision for the exact candidate digest "
        "itself (so a run that selects this asset without the human_approval check still refuses), then runs as "
        "a saga under the promotion lock: fenced alias move, index swap, announcement; compensated on failure. "
        "While the candidate waits for a person, a run that asked the gate leaves production as it is.",
    )
    def production_model(
        context: dg.AssetExecutionContext, config: PromotionConfig, state: StateStoreResource, locks: LocksResource
    ) -> Iterator[dg.MaterializeResult]:
        result = promotion_step(context, config, state, locks)
        if result is not None:
            yield result

    return [embedding_model, golden_questions, evaluation_report, production_model]
