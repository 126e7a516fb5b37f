"""The documents domain's Dagster definitions: `raw_documents` and `document_chunks`, per landing batch (their
work is in `documents/ingestion.py`)."""

import dagster as dg

from runtime_ops.documents.ingestion import chunk_batch, parse_batch
from runtime_ops.documents.partitions import landing_batches
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.landing import LandingResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import io_retry


def build_document_assets(spec: PipelineSpec) -> list[dg.AssetsDefinition]:
    """The pipeline's `raw_documents` and `document_chunks`, partitioned by its landing batches."""
    batches = landing_batches(spec)

    @dg.asset(
        key=spec.asset_path("raw_documents"),
        partitions_def=batches,
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "documents"},
        retry_policy=io_retry(spec.retry_delay_s),
        description="Landed objects of one batch, parsed to text (txt, md, html, json, jsonl, pdf). Unreadable, "
        "binary, empty or oversized files are quarantined with a reason; the rest of the batch goes on.",
    )
    @observed
    def raw_documents(
        context: dg.AssetExecutionContext, state: StateStoreResource, landing: LandingResource
    ) -> dg.MaterializeResult:
        store = state.store().scoped(spec.name)
        return parse_batch(
            context,
            store.documents,
            store.ledger,
            landing.source(spec.landing),
            spec.landing.max_document_bytes,
            spec.timeouts.parse_document_s,
        )

    @dg.asset(
        key=spec.asset_path("document_chunks"),
        partitions_def=batches,
        deps=[raw_documents],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "documents"},
        retry_policy=io_retry(spec.retry_delay_s),
        description="Parsed documents of one batch split into overlapping chunks that fit the embedder's window "
        "(counted with its tokenizer), once per chunking profile in use (production's and a candidate's that cuts "
        "differently); a new version of a key replaces the old one atomically.",
    )
    @observed
    def document_chunks(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return chunk_batch(context, state.store().scoped(spec.name), spec)

    return [raw_documents, document_chunks]
