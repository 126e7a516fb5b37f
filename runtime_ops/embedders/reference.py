"""The stored form of a pretrained or remote model: its identity as canonical JSON (pure, no I/O).

A trained LSA model is stored as its own bytes. A model we do not train (an embeddings endpoint, a local
sentence-transformers directory) is stored as a small JSON document naming what identifies it (endpoint + model
+ dimensions; model name + digest of its weights); the sha256 of those bytes is the model's digest, so the gate
binds a decision to exactly one such model and registering the same one twice is the same version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

FORMAT = "runtime_ops.embedder_reference"
FORMAT_VERSION = 1
_MAX_BYTES = 64 * 1024


def reference_bytes(identity: Mapping[str, str | int]) -> bytes:
    """Canonical JSON of `identity` (which must name its `kind`): the same identity gives the same bytes."""
    if not isinstance(identity.get("kind"), str) or not identity["kind"]:
        raise ValueError(f"an embedder identity names its kind, got {dict(identity)!r}")
    for key, value in identity.items():
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"embedder identity field {key!r} must be a string or an integer, got {value!r}")
    document = {"format": FORMAT, "format_version": FORMAT_VERSION, "identity": dict(identity)}
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def is_reference(data: bytes) -> bool:
    return data[:1] == b"{"


def parse_reference(data: bytes) -> dict[str, Any]:
    """The identity stored by `reference_bytes`; ValueError naming the problem for anything else."""
    if len(data) > _MAX_BYTES:
        raise ValueError(f"embedder reference is {len(data)} bytes; at most {_MAX_BYTES} expected")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"invalid embedder reference: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError("invalid embedder reference: not a runtime_ops embedder reference")
    if document.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"unsupported embedder reference version {document.get('format_version')!r}")
    identity = document.get("identity")
    if not isinstance(identity, dict) or not isinstance(identity.get("kind"), str):
        raise ValueError("invalid embedder reference: no identity with a kind")
    return identity
