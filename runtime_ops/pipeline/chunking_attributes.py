"""The `chunking:` section of a pipeline's defs.yaml (the YAML interface; `pipeline.chunking` says what it means)."""

from __future__ import annotations

from typing import Annotated

import dagster as dg
from pydantic import Field, ValidationInfo, field_validator

from runtime_ops.pipeline.chunking import MIN_TOKENS


class ChunkingAttributes(dg.Resolvable, dg.Model):
    """How documents are cut into chunks for the pipeline's embedder. Left out, both follow the embedder:
    sentence-transformers its window (max_seq_length, e.g. 256 for all-MiniLM-L6-v2) with an eighth of it
    shared; an endpoint 512 estimated tokens; lsa 1,200 characters with 150 shared, as before."""

    max_tokens: Annotated[int, Field(ge=MIN_TOKENS, le=1_000_000)] | None = Field(
        default=None,
        description="Most tokens a chunk counts, shared context and the model's special tokens included, as the "
        "embedder's tokenizer counts them (an endpoint model and lsa: estimated, one per 3 bytes of UTF-8). At most "
        "the embedder's window. Default: the window (sentence-transformers), 512 (openai), lsa: 1,200 characters.",
    )
    overlap_tokens: Annotated[int, Field(ge=0)] | None = Field(
        default=None,
        description="Tokens of shared context each chunk repeats from the previous one (below max_tokens). "
        "Default: an eighth of max_tokens.",
    )

    @field_validator("overlap_tokens")
    @classmethod
    def _below_max(cls, v: int | None, info: ValidationInfo) -> int | None:
        most = info.data.get("max_tokens")
        if v is not None and most is not None and v >= most:
            raise ValueError(f"{v} must be below max_tokens ({most}): a chunk would hold nothing but shared context")
        return v
