"""The serving domain's Dagster definitions: `document_embeddings`, `retrieval_index` and `rag_answers` of one
pipeline (their work is in `serving/document_embeddings.py`, `serving/retrieval_index.py`, `serving/rag_answers.py`)."""

import dagster as dg

from runtime_ops.automation import follow_upstream
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import io_retry
from runtime_ops.serving.document_embeddings import embed_corpus
from runtime_ops.serving.rag_answers import AnswersConfig, answer_questions
from runtime_ops.serving.retrieval_index import index_corpus
from runtime_ops.serving.vector_store import pipeline_vectors


def build_serving_assets(
    spec: PipelineSpec, document_chunks: dg.AssetsDefinition, production_model: dg.AssetsDefinition
) -> list[dg.AssetsDefinition]:
    """Embeddings, index and answers of one pipeline; declarative automation keeps them following upstream."""
    follow = follow_upstream(document_chunks.key)

    @dg.asset(
        key=spec.asset_path("document_embeddings"),
        deps=[document_chunks, production_model],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "serving"},
        retry_policy=io_retry(spec.retry_delay_s),
        automation_condition=follow,
        description="The production model's vector index, kept in step with the corpus: the chunks of documents that "
        "became current are embedded (once per model version) and upserted, documents superseded or deleted are "
        "removed, by replaying the corpus change feed (cost grows with the changes, not the corpus). A model's "
        "first run fills its index from the whole corpus; a killed run resumes. Records the drift signals of the "
        "new chunks (embedding shift from the corpus centroid, OOV rate) for the retrain policy.",
    )
    @observed
    def document_embeddings(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return embed_corpus(context, state.store().scoped(spec.name), pipeline_vectors(spec))

    @dg.asset(
        key=spec.asset_path("retrieval_index"),
        deps=[document_embeddings],
        group_name=spec.name,
        kinds={"vectors"},
        tags={"domain": "serving"},
        retry_policy=io_retry(spec.retry_delay_s),
        automation_condition=follow,
        # Every run that can move the pipeline's aliases holds this pool (automation and UI runs carry no tags).
        pool=spec.lifecycle_pool,
        description="The index the pipeline serves (`/api/search`, `/api/answer`, rag_answers): the production "
        "model's vector index, complete and in step, behind the `retrieval_index` alias (a promotion swaps it "
        "to the new model's index, a rollback back; earlier indexes stay until retention collects them). The "
        "alias moves under the promotion lock, only while the index is still production's.",
    )
    @observed
    def retrieval_index(
        context: dg.AssetExecutionContext, state: StateStoreResource, locks: LocksResource
    ) -> dg.MaterializeResult:
        store = state.store().scoped(spec.name)
        return index_corpus(context, store, pipeline_vectors(spec), spec.retention, locks.locker())

    @dg.asset(
        key=spec.asset_path("rag_answers"),
        deps=[retrieval_index],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "serving"},
        retry_policy=io_retry(spec.retry_delay_s),
        automation_condition=follow,
        description="Answers to questions from the retrieval index: extractive (best sentences of the top chunks) "
        "when the pipeline has no answers.endpoint (RUNTIME_OPS_MODEL_ENDPOINT).",
    )
    @observed
    def rag_answers(
        context: dg.AssetExecutionContext, config: AnswersConfig, state: StateStoreResource
    ) -> dg.MaterializeResult:
        return answer_questions(context, config, state.store().scoped(spec.name), pipeline_vectors(spec), spec.answers)

    return [document_embeddings, retrieval_index, rag_answers]
