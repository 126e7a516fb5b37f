"""Chunking profiles: how a pipeline's documents are cut for one embedder (pure, no I/O).

A profile is what decides a corpus's chunks: the measure of length (the embedder's tokenizer, an estimate, or
characters), the most tokens a chunk may count and how many of them it repeats from the previous one. Its digest
identifies the chunks: chunks are stored per (document, profile), every model version records the profile it
reads, and two embedders whose profiles are equal share their chunks.

- sentence-transformers: its own tokenizer, special tokens included; at most the model's window
  (`max_seq_length`), which is also the default; overlap an eighth of it.
- an OpenAI-compatible endpoint: no tokenizer is available offline, so an estimate of one token per 3 bytes of
  UTF-8, rounded up (tokenizers of OpenAI's kind average about 4 bytes a token on English prose and code, so the
  estimate runs high there; text that tokenizes worse, such as rare scripts or random strings, can run over it).
  The window is the declared `max_input_tokens` (8,191, the limit of OpenAI's embedding models); the default
  chunk is 512 estimated tokens, far below it, since a chunk that long makes a poor retrieval unit anyway.
- lsa reads whole texts and has no window: left out, its chunks stay what they always were (1,200 characters
  with 150 of overlap, `LEGACY`); given, max_tokens and overlap_tokens count estimated tokens.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Part of every profile's digest: a change of the chunking algorithm that changes its output is a new version.
CHUNKER_VERSION = 1
CHARS = "chars"
ESTIMATE = "estimate"
TOKENIZER = "tokenizer"
ESTIMATE_BYTES_PER_TOKEN = 3
# The input limit of OpenAI's embedding models, the default window of an OpenAI-compatible endpoint.
OPENAI_WINDOW = 8191
# Default chunk of an endpoint model and of lsa when its chunking is declared, in estimated tokens.
ENDPOINT_DEFAULT_TOKENS = 512
LSA_DEFAULT_TOKENS = 400  # ~1,200 bytes, the size lsa's chunks have always had
# No chunk limit below this: a chunk must hold a sentence, and the model's own special tokens count too.
MIN_TOKENS = 16


@dataclass(frozen=True)
class ChunkingProfile:
    """What decides a corpus's chunks. `measure` identifies how length is counted ({"kind": "chars"}, {"kind":
    "estimate", "bytes_per_token": 3} or {"kind": "tokenizer", "sha256": <digest of its files>}); `locator` says
    where a tokenizer is found (the model's name or folder) and is not part of the identity."""

    measure: Mapping[str, str | int]
    max_tokens: int
    overlap_tokens: int
    locator: str = ""
    window: int | None = field(default=None, compare=False)  # the model's, for messages; not part of the identity

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or not 0 <= self.overlap_tokens < self.max_tokens:
            raise ValueError(
                f"a chunking profile needs 0 <= overlap_tokens < max_tokens, got {self.overlap_tokens} and "
                f"{self.max_tokens}"
            )

    @property
    def kind(self) -> str:
        return str(self.measure["kind"])

    def identity(self) -> dict[str, Any]:
        return {
            "chunker": CHUNKER_VERSION,
            "measure": dict(self.measure),
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
        }

    @property
    def digest(self) -> str:
        canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {**self.identity(), "locator": self.locator}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChunkingProfile:
        return cls(
            measure=dict(data["measure"]),
            max_tokens=int(data["max_tokens"]),
            overlap_tokens=int(data["overlap_tokens"]),
            locator=str(data.get("locator") or ""),
        )

    def describe(self) -> str:
        unit = {CHARS: "characters", ESTIMATE: "estimated tokens"}.get(self.kind, "tokens")
        by = f" of {self.locator}" if self.kind == TOKENIZER and self.locator else ""
        return f"{self.max_tokens} {unit}{by}, {self.overlap_tokens} shared ({self.digest[:12]})"


# The chunks of every corpus before profiles existed (and lsa's default): migration 0018 records it as profile 1.
LEGACY = ChunkingProfile({"kind": CHARS}, 1200, 150)
ESTIMATE_MEASURE: Mapping[str, str | int] = {"kind": ESTIMATE, "bytes_per_token": ESTIMATE_BYTES_PER_TOKEN}


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text`: one per 3 bytes of UTF-8, rounded up."""
    return -(-len(text.encode("utf-8")) // ESTIMATE_BYTES_PER_TOKEN)


class ChunkingError(ValueError):
    """Chunk settings the embedder cannot read; `field` is the setting at fault (max_tokens or overlap_tokens)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"chunking.{field}: {message}")
        self.field = field
        self.message = message


def limits(
    kind: str, window: int | None, max_tokens: int | None, overlap_tokens: int | None, *, model: str = ""
) -> tuple[int, int]:
    """(max_tokens, overlap_tokens) of an embedder of `kind` whose window is `window` (None: none), from what a
    pipeline declares (None: the default); ChunkingError naming the field, the window and the fix."""
    if max_tokens is None:
        if kind == "sentence_transformers" and window is not None:
            max_tokens = window
        elif kind == "openai":
            max_tokens = min(ENDPOINT_DEFAULT_TOKENS, window or OPENAI_WINDOW)
        else:
            max_tokens = LSA_DEFAULT_TOKENS
    if max_tokens < MIN_TOKENS:
        raise ChunkingError("max_tokens", f"{max_tokens} is below the minimum of {MIN_TOKENS}")
    if window is not None and max_tokens > window:
        what = f"{model} reads" if model else "the model reads"
        raise ChunkingError(
            "max_tokens",
            f"{max_tokens} is above the window of the embedder ({what} at most {window} tokens, special tokens "
            f"included; the rest of a longer chunk would never be embedded); set it to at most {window} or leave "
            "it out",
        )
    if overlap_tokens is None:
        overlap_tokens = max_tokens // 8
    if not 0 <= overlap_tokens < max_tokens:
        raise ChunkingError(
            "overlap_tokens", f"{overlap_tokens} must be at least 0 and below max_tokens ({max_tokens})"
        )
    return max_tokens, overlap_tokens
