"""Building embedders from a pipeline's settings or from a registered version (glue, no Dagster)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runtime_ops.embedders.reference import is_reference, parse_reference
from runtime_ops.http.urls import public_url
from runtime_ops.pipeline.spec import EmbedderSpec, SentenceTransformerSpec
from runtime_ops.store.registry.artifacts import Artifacts
from runtime_ops.store.registry.registry import Registry

if TYPE_CHECKING:
    from runtime_ops.embedders.base import TextEmbedder
    from runtime_ops.embedders.lsa import Embedder


@functools.lru_cache(maxsize=8)
def _lsa_from_bytes(digest: str, data: bytes) -> Embedder:
    # numpy: kept out of the code location's load
    from runtime_ops.embedders.lsa import Embedder

    return Embedder.from_bytes(data)


@functools.lru_cache(maxsize=4)
def _sentence_model(model: str, batch_size: int) -> TextEmbedder:
    # Loading weights takes seconds: one instance per model per process.
    # numpy: kept out of the code location's load
    from runtime_ops.embedders.sentence import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(model, batch_size=batch_size)


def pretrained_embedder(spec: EmbedderSpec) -> TextEmbedder:
    """The embedder a pipeline of a pretrained kind (openai, sentence_transformers) declares."""
    if spec.kind == "openai":
        # numpy: kept out of the code location's load
        from runtime_ops.embedders.openai import OpenAIEmbedder

        o = spec.openai
        assert o is not None, "EmbedderSpec checks that kind openai has its settings"
        key = os.environ.get(o.api_key_env) if o.api_key_env else None
        return OpenAIEmbedder(
            o.endpoint,
            o.model,
            o.dimensions,
            api_key=key or None,
            batch_size=o.batch_size,
            max_batch_chars=o.max_batch_chars,
            concurrency=o.concurrency,
            timeout_s=o.timeout_s,
            send_dimensions=o.send_dimensions,
        )
    if spec.kind == "sentence_transformers":
        st = spec.sentence_transformers or SentenceTransformerSpec()
        return _sentence_model(st.model, st.batch_size)
    raise ValueError(f"embedder kind {spec.kind!r} is trained, not pretrained")


def runtime_params(spec: EmbedderSpec) -> dict[str, str | int | float | bool | None]:
    """How a pretrained model is called (not what identifies it): recorded with its version, so a later run can
    call it the same way (the API key's variable *name*, never its value)."""
    if spec.kind == "openai" and spec.openai is not None:
        o = spec.openai
        return {
            "endpoint_url": o.endpoint,
            "api_key_env": o.api_key_env,
            "batch_size": o.batch_size,
            "max_batch_chars": o.max_batch_chars,
            "concurrency": o.concurrency,
            "timeout_s": o.timeout_s,
            "send_dimensions": o.send_dimensions,
        }
    if spec.kind == "sentence_transformers" and spec.sentence_transformers is not None:
        return {"batch_size": spec.sentence_transformers.batch_size}
    return {}


def embedder_from_artifact(
    digest: str, data: bytes, params: Mapping[str, Any] | None = None, spec: EmbedderSpec | None = None
) -> TextEmbedder:
    """The embedder a registered artifact holds. How to call it comes from the pipeline's current `spec` when it
    declares the same model, else from the `params` recorded with the version."""
    if not is_reference(data):
        return _lsa_from_bytes(digest, data)
    identity = parse_reference(data)
    kind = identity["kind"]
    recorded = dict(params or {})
    if kind == "openai":
        # numpy: kept out of the code location's load
        from runtime_ops.embedders.openai import OpenAIEmbedder, embeddings_url

        declared = spec.openai if spec is not None and spec.kind == "openai" else None
        if (
            spec is not None
            and declared is not None
            and public_url(embeddings_url(declared.endpoint)) == identity["endpoint"]
            and declared.model == identity["model"]
            and declared.dimensions == identity["dimensions"]
        ):
            return pretrained_embedder(spec)
        key_env = recorded.get("api_key_env")
        key = os.environ.get(str(key_env)) if key_env else None
        return OpenAIEmbedder(
            str(recorded.get("endpoint_url") or identity["endpoint"]),
            str(identity["model"]),
            int(identity["dimensions"]),
            api_key=key or None,
            batch_size=int(recorded.get("batch_size", 64)),
            max_batch_chars=int(recorded.get("max_batch_chars", 100_000)),
            concurrency=int(recorded.get("concurrency", 4)),
            timeout_s=float(recorded.get("timeout_s", 30.0)),
            send_dimensions=bool(recorded.get("send_dimensions", False)),
        )
    if kind == "sentence_transformers":
        batch = int(recorded.get("batch_size", 64))
        if spec is not None and spec.sentence_transformers is not None:
            batch = spec.sentence_transformers.batch_size
        embedder = _sentence_model(str(identity["model"]), batch)
        found = getattr(embedder, "identity", lambda: {})().get("weights_digest")
        if found != identity.get("weights_digest"):
            raise ValueError(
                f"sentence-transformers model {identity['model']!r} on this host has weights {found}, but the "
                f"registered version was made with {identity.get('weights_digest')}; install the same model files"
            )
        return embedder
    raise ValueError(f"unknown embedder kind {kind!r} in a registered model")


def load_embedder(
    registry: Registry, artifacts: Artifacts, version: int, spec: EmbedderSpec | None = None
) -> TextEmbedder:
    model = registry.get_model(version)
    if model is None:
        raise LookupError(f"model version {version} is not in the registry")
    data = artifacts.get_artifact(model["artifact_id"])
    return embedder_from_artifact(model["digest"], data, model.get("params"), spec)
