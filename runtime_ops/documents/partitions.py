from __future__ import annotations

import functools

import dagster as dg

from runtime_ops.pipeline.spec import PipelineSpec


# One partition per landing batch (a sensor tick that found new objects), never one per file: Dagster's
# UI and daemon slow down past tens of thousands of partitions, and a bucket holds millions of files.
@functools.cache
def _batches(name: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=name)


def landing_batches(spec: PipelineSpec) -> dg.DynamicPartitionsDefinition:
    """The pipeline's landing-batch partitions (`<pipeline>__landing_batches`)."""
    return _batches(spec.qualified("landing_batches"))
