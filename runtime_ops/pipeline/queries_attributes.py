"""The `queries:` section of a pipeline's defs.yaml: what the query log keeps of each search/answer request."""

from __future__ import annotations

from typing import Literal

import dagster as dg
from pydantic import Field, field_validator

from runtime_ops.durations import parse_duration
from runtime_ops.pipeline.spec import QueryLogSpec


class QueriesAttributes(dg.Resolvable, dg.Model):
    log: Literal["text", "hash", "off"] = Field(
        default="hash",
        description="What the query log keeps of each query: `text` (the text and its SHA-256), `hash` (only the "
        "SHA-256 of the normalised text: equal queries can be grouped, none can be read back) or `off` (neither). "
        "Every request is logged either way (its arm, model versions, the items shown), so feedback still works.",
    )
    retain: str = Field(
        default="30d",
        description="How long query records, their shown items and their feedback are kept (e.g. 7d, 30d, 2160h); "
        "the pipeline's query_log_retention_job deletes older ones every day.",
    )

    @field_validator("retain", mode="before")
    @classmethod
    def _yaml_scalars(cls, v: object) -> object:
        # YAML reads a bare `off` as false and `3600` as a number: both are durations as written.
        return "off" if v is False else str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("retain")
    @classmethod
    def _check_retain(cls, v: str) -> str:
        if parse_duration(v) is None:
            raise ValueError("must be a duration such as 30d (the query log cannot be kept forever)")
        return v

    def spec(self) -> QueryLogSpec:
        retain = parse_duration(self.retain)
        assert retain is not None, "validated above"
        return QueryLogSpec(log=self.log, retain=retain)
