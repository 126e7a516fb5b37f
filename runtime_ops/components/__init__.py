"""The project's Dagster component types (`dg list components`) and how the pipelines' declarations load."""

from runtime_ops.components.inference_pipeline import InferencePipeline
from runtime_ops.components.retrieval_pipeline import RetrievalPipeline

__all__ = ["InferencePipeline", "RetrievalPipeline"]
