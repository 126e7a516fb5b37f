"""The inference endpoint resource: where the labelling pipelines' model answers (RUNTIME_OPS_INFERENCE_URL) and
its key (RUNTIME_OPS_INFERENCE_API_KEY, handed to Dagster as a `dg.EnvVar`, so the UI and the repository snapshot
show the variable's name, never the key). No URL: the pipelines use the local stand-in model."""

from __future__ import annotations

import dagster as dg


class InferenceEndpointResource(dg.ConfigurableResource):
    """Process-wide; each pipeline's model name, prices and concurrency are in its defs.yaml."""

    url: str | None = None
    api_key: str | None = None
