"""`RetrievalPipeline`: the Dagster component a team declares once per pipeline in `defs/<name>/defs.yaml`.

It builds that pipeline's whole definitions (landing sensor, ingestion, training, evaluation, the two gate
checks, promotion, serving assets, jobs, schedules, approval and alert sensors) under the pipeline's name.
Process-wide pieces (state store, locks, logger, the automation sensor) come from `runtime_ops.definitions`.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from runtime_ops.components.build import build_pipeline_defs
from runtime_ops.pipeline.attributes import PipelineAttributes
from runtime_ops.pipeline.resolve import LOADING_SETTINGS, resolve_spec
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.settings import get_settings


class RetrievalPipeline(dg.Component, dg.Resolvable, PipelineAttributes):
    """An approval-gated retrieval pipeline: landing -> documents -> model -> gate -> promotion -> serving."""

    def spec(self, base_dir: Path, source: str = "") -> PipelineSpec:
        settings = LOADING_SETTINGS.get() or get_settings()
        return resolve_spec(self, settings, base_dir=base_dir, source=source)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        source = str(context.path / "defs.yaml")
        return build_pipeline_defs(self.spec(context.path, source))
