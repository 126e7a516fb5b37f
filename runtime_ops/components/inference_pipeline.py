"""`InferencePipeline`: the article's flow as a component, declared in `defs/<name>/defs.yaml`: tickets land in a
folder or S3 prefix, a model behind an OpenAI-compatible endpoint labels them (the local stand-in model when
RUNTIME_OPS_INFERENCE_URL is unset), and the labels are published only after the approval gate approves them
(an `ApprovalGate` on `<name>/ticket_labels`, declared beside it). See docs/inference.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, field_validator

from runtime_ops.durations import parse_duration
from runtime_ops.inference.costs import Prices
from runtime_ops.inference.spec import InferenceSpec
from runtime_ops.pipeline.resolve import LOADING_SETTINGS
from runtime_ops.pipeline.spec import check_name
from runtime_ops.settings import Settings, get_settings

COMPONENT_TYPE = "runtime_ops.components.InferencePipeline"


class InferencePipeline(dg.Component, dg.Resolvable, dg.Model):
    """Records labelled by a model through an OpenAI-compatible endpoint, published after approval."""

    name: str = Field(description="Prefixes the assets (`<name>/ticket_labels`), jobs and sensors; the store's scope.")
    labels: list[str] = Field(
        min_length=2,
        max_length=50,
        description="The labels the model chooses from; the last is the catch-all of the stand-in model.",
    )
    landing: str | None = Field(
        default=None,
        description="Where tickets land: a folder or s3://bucket/prefix. Default: $RUNTIME_OPS_HOME/<name>/landing.",
    )
    output: str | None = Field(
        default=None,
        description="Where label sets and published labels are written: a folder or s3://bucket/prefix. "
        "Default: $RUNTIME_OPS_HOME/<name>/output.",
    )
    model_name: str = Field(
        default="gpt-4o-mini", min_length=1, max_length=255, description="`model` sent to the endpoint."
    )
    prompt_price_per_1k: float = Field(default=0.0, ge=0.0, description="USD per 1,000 prompt tokens of `model_name`.")
    completion_price_per_1k: float = Field(default=0.0, ge=0.0, description="USD per 1,000 completion tokens.")
    concurrency: int = Field(default=4, ge=1, le=64, description="Most calls to the endpoint in flight at once.")
    timeout: str = Field(default="30s", description="Timeout of one call (`30s`, `2m`).")
    schedule: str | None = Field(default=None, description="Cron (UTC) of a scheduled run; null: the sensor only.")

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return check_name(v)

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: list[str]) -> list[str]:
        bad = [label for label in v if not label or not label.replace("_", "").isalnum() or label != label.lower()]
        if bad:
            raise ValueError(f"labels must be lowercase words (letters, digits, _): {bad[0]!r} is not")
        if len(set(v)) != len(v):
            raise ValueError("labels must be distinct")
        return v

    @field_validator("timeout")
    @classmethod
    def _check_timeout(cls, v: str) -> str:
        parsed = parse_duration(v)
        if parsed is None or parsed.total_seconds() <= 0:
            raise ValueError(f"timeout must be a positive duration such as 30s, got {v!r}")
        return v

    def spec(self, settings: Settings) -> InferenceSpec:
        home = settings.resolved_home / self.name
        timeout = parse_duration(self.timeout)
        assert timeout is not None  # checked by the validator
        return InferenceSpec(
            name=self.name,
            landing=self.landing or str(home / "landing"),
            output=self.output or str(home / "output"),
            labels=tuple(self.labels),
            model=self.model_name,
            prices=Prices(self.prompt_price_per_1k, self.completion_price_per_1k),
            concurrency=self.concurrency,
            timeout_s=timeout.total_seconds(),
            schedule=self.schedule,
            sensor_seconds=settings.sensor_seconds(15),
            retry_delay_s=settings.retry_delay.total_seconds(),
        )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        from runtime_ops.inference.assets import build_inference_defs

        # The settings the code location is being built with (build_definitions), as RetrievalPipeline reads them.
        return build_inference_defs(self.spec(LOADING_SETTINGS.get() or get_settings()), _require_approval)


def _require_approval(context: dg.AssetExecutionContext, target: dg.AssetKey) -> dict[str, Any]:
    # The gate of any asset (design: approvals/asset_gate.py); imported when a publish runs.
    from runtime_ops.approvals.asset_gate import require_approval  # pyright: ignore[reportMissingImports]

    return require_approval(context, target)


def inference_specs(folder: Path, settings: Settings) -> dict[str, InferenceSpec]:
    """The labelling pipelines declared under `folder`, by name, without building Dagster definitions (the CLI)."""
    import yaml

    specs = {}
    for path in sorted(folder.rglob("defs.yaml")):
        doc: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("type") == COMPONENT_TYPE:
            spec = InferencePipeline.model_validate(doc.get("attributes") or {}).spec(settings)
            specs[spec.name] = spec
    return specs
