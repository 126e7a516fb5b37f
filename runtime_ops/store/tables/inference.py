"""Inference results: one row per (pipeline, item, input digest, model), written as soon as the model answered.

The unique key is the idempotency key of the labelling pipeline: a run that was killed and retried finds the
results stored before the kill and calls the endpoint only for the items without one (`store/inference/`).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, String, Table, Text, UniqueConstraint

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata

inference_results = Table(
    "inference_results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("item_id", String(255), nullable=False),
    Column("input_digest", String(64), nullable=False),  # sha256 of the request body without the model
    Column("model", String(255), nullable=False),
    Column("output", Text, nullable=False),  # the reply's content as the model wrote it (cut at 2,000 characters)
    Column("label", String(255)),  # None: the reply named no declared label
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Column("run_id", String(64)),  # the Dagster run that called the model
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("pipeline", "item_id", "input_digest", "model", name="uq_inference_results_item"),
    Index("ix_inference_results_pipeline_created", "pipeline", "created_at"),
)
