"""The pipeline's vector store as Dagster steps open it: a configuration error fails the step without retries."""

import dagster as dg

from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.vectors.base import VectorStore, VectorStoreError
from runtime_ops.vectors.factory import pipeline_vector_store


def pipeline_vectors(spec: PipelineSpec) -> VectorStore:
    """The pipeline's vector store (one per URL and process); a configuration error fails without retries."""
    try:
        return pipeline_vector_store(spec.vector_store)
    except VectorStoreError as exc:
        raise dg.Failure(f"pipeline {spec.name}: {exc}", allow_retries=False) from None
