"""What an embedder's declaration decides of a model, and its digest (pure, no I/O).

The corpus sensor compares the declared embedder with what the newest model version recorded: a change in any
field that makes other vectors is a new candidate (lsa: dim, max_features, seed, train_sample; an endpoint: its
public URL, model name and dimensions; sentence-transformers: the model). How a model is called (batch sizes,
concurrency, timeout, the key's variable) makes the same vectors: it takes effect on the next run, without a
retrain, and is not part of the digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from runtime_ops.http.urls import endpoint_url, public_url
from runtime_ops.pipeline.spec import EmbedderSpec, SentenceTransformerSpec

# Per kind, the declared fields that decide the vectors, by the name the version records them under.
MODEL_FIELDS: dict[str, tuple[str, ...]] = {
    "lsa": ("dim", "max_features", "seed", "train_sample"),
    "openai": ("endpoint", "model", "dimensions"),
    "sentence_transformers": ("model",),
}

Fields = dict[str, str | int]


def declared_fields(spec: EmbedderSpec) -> Fields:
    """The model-deciding fields of a declaration, named and shaped as a version records them."""
    if spec.kind == "openai":
        o = spec.openai
        assert o is not None, "EmbedderSpec checks that kind openai has its settings"
        # The version records the public URL of the embeddings route (no credentials, no query).
        url = public_url(endpoint_url(o.endpoint, "/embeddings", "embedder.openai.endpoint"))
        return {"kind": "openai", "endpoint": url, "model": o.model, "dimensions": o.dimensions}
    if spec.kind == "sentence_transformers":
        st = spec.sentence_transformers or SentenceTransformerSpec()
        return {"kind": "sentence_transformers", "model": st.model}
    return {
        "kind": spec.kind,
        "dim": spec.dim,
        "max_features": spec.max_features,
        "seed": spec.seed,
        "train_sample": spec.train_sample,
    }


def recorded_fields(params: Mapping[str, Any]) -> Fields:
    """The same fields as a version recorded them (`params` of its registry row). A field the version did not
    record (a version older than the field) is left out, so an upgrade alone is no change."""
    kind = str(params.get("kind", "lsa"))
    fields: Fields = {"kind": kind}
    for name in MODEL_FIELDS.get(kind, ()):
        value = params.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            fields[name] = value
    return fields


def declaration_digest(fields: Mapping[str, str | int]) -> str:
    """sha256 of the fields as canonical JSON: equal fields, equal digest."""
    canonical = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def declaration_change(declared: Fields, recorded: Fields) -> str | None:
    """What the declaration changed from the recorded model (None: the same model)."""
    if declared["kind"] != recorded["kind"]:
        return f"the embedder changed from {recorded['kind']} to {declared['kind']}"
    compared = {name: value for name, value in declared.items() if name in recorded}
    if declaration_digest(compared) == declaration_digest(recorded):
        return None
    changes = [
        f"{name} {recorded[name]} -> {declared[name]}"
        for name in MODEL_FIELDS.get(str(declared["kind"]), ())
        if name in recorded and recorded[name] != declared[name]
    ]
    return f"the {declared['kind']} embedder's declaration changed: {', '.join(changes)}"
