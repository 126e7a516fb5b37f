"""One labelling pipeline, resolved from its `defs.yaml` (`runtime_ops.components.InferencePipeline`). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from runtime_ops.inference.costs import Prices


@dataclass(frozen=True)
class InferenceSpec:
    name: str  # asset key prefix (`tickets/ticket_labels`), job and sensor prefix, the state store's scope
    landing: str  # where tickets land: a folder or s3://bucket/prefix
    output: str  # where label sets and the published labels are written: a folder or s3://bucket/prefix
    labels: tuple[str, ...]  # the declared labels; the last is the catch-all of the stand-in model
    model: str  # the `model` sent to the endpoint (the stand-in is used when no endpoint is configured)
    prices: Prices  # of `model_name`, per 1,000 tokens (the stand-in costs nothing)
    concurrency: int  # most calls in flight at once
    timeout_s: float  # of one call
    schedule: str | None  # cron of the scheduled run (None: only the landing sensor starts runs)
    sensor_seconds: int
    retry_delay_s: float = 2.0  # the first wait before a failed labelling step runs again (RUNTIME_OPS_RETRY_DELAY)

    def qualified(self, name: str) -> str:
        return f"{self.name}__{name}"

    @property
    def labels_key(self) -> tuple[str, str]:
        return (self.name, "ticket_labels")

    @property
    def published_key(self) -> tuple[str, str]:
        return (self.name, "published_labels")


def label_set_key(digest: str) -> str:
    """Where a label set is kept in the output, by its digest (the asset's data version)."""
    return f"label_sets/{digest}.jsonl"


PUBLISHED_KEY = "published/labels.jsonl"
