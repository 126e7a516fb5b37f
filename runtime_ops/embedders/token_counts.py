"""How long a text is for an embedder and how much of it the embedder reads: token counters, windows and the
chunking profile a pipeline declares (no torch: only the tokenizer files are read).

A sentence-transformers model is measured with its own tokenizer (`tokenizer.json`, read by the `tokenizers`
library that sentence-transformers itself runs), with the truncation and padding the file ships switched off
(all-MiniLM-L6-v2's truncates at 128 and pads to 128) and the special tokens the model adds counted; its window
is `max_seq_length`. Endpoint models and lsa are measured by `pipeline.chunking.estimate_tokens`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime_ops.embedders.model_files import INSTALL_HINT, resolve_model_directory
from runtime_ops.pipeline.chunking import (
    CHARS,
    ESTIMATE,
    ESTIMATE_MEASURE,
    LEGACY,
    TOKENIZER,
    ChunkingError,
    ChunkingProfile,
    estimate_tokens,
    limits,
)
from runtime_ops.pipeline.spec import ChunkingSpec, EmbedderSpec, SentenceTransformerSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Count = Callable[[str], int]

# What a tokenizer is made of: its identity is the digest of the ones the model directory has.
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
)


class TokenizerMismatch(ValueError):
    """The tokenizer found for a profile is not the one its chunks were cut with."""


def model_directory(model: str) -> Path:
    """The directory of a sentence-transformers model (a folder, or the one an offline package ships)."""
    return resolve_model_directory(model)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@functools.lru_cache(maxsize=16)
def model_window(directory: Path) -> int | None:
    """The most tokens the model reads of one text: `max_seq_length` of sentence_bert_config.json, else the
    tokenizer's `model_max_length` and the network's `max_position_embeddings`, whichever is smaller."""
    declared = _json(directory / "sentence_bert_config.json").get("max_seq_length")
    if isinstance(declared, int) and declared > 0:
        return declared
    found = [
        value
        for value in (
            _json(directory / "tokenizer_config.json").get("model_max_length"),
            _json(directory / "config.json").get("max_position_embeddings"),
        )
        if isinstance(value, int) and 0 < value < 1_000_000
    ]
    return min(found) if found else None


@functools.lru_cache(maxsize=16)
def tokenizer_digest(directory: Path) -> str:
    """sha256 over the tokenizer files the model directory has (names and bytes, length-prefixed)."""
    h = hashlib.sha256()
    for name in _TOKENIZER_FILES:
        path = directory / name
        if path.is_file():
            data = path.read_bytes()
            for part in (name.encode(), data):
                h.update(len(part).to_bytes(8, "big"))
                h.update(part)
    return h.hexdigest()


@functools.lru_cache(maxsize=16)
def _tokenizer(directory: Path) -> Tokenizer | Any:  # Any: transformers' tokenizer, typed loosely there
    path = directory / "tokenizer.json"
    if path.is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path))
        # The file's own truncation and padding would make every count at most (or at least) their length.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer
    try:  # a model with a slow tokenizer only (vocab files, no tokenizer.json): the one transformers builds
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ImportError(f"counting tokens of {directory} needs transformers: {INSTALL_HINT}") from exc
    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def tokenizer_counter(directory: Path) -> Count:
    """Tokens the model in `directory` makes of a text, its special tokens included (no truncation)."""
    tokenizer: Any = _tokenizer(directory)
    if hasattr(tokenizer, "encode_batch"):  # tokenizers.Tokenizer

        def count(text: str) -> int:
            return len(tokenizer.encode(text).ids)

        return count

    def count_slow(text: str) -> int:  # transformers' slow tokenizer
        return len(tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])

    return count_slow


def declared_profile(embedder: EmbedderSpec, chunking: ChunkingSpec) -> ChunkingProfile:
    """The chunking profile a pipeline declares: its embedder's measure and window, and its chunking settings
    (defaults from the embedder). ValueError (naming the field and the window) for settings the model cannot read."""
    if embedder.kind == "sentence_transformers":
        st = embedder.sentence_transformers or SentenceTransformerSpec()
        directory = model_directory(st.model)
        window = model_window(directory)
        most, overlap = limits(embedder.kind, window, chunking.max_tokens, chunking.overlap_tokens, model=st.model)
        measure = {"kind": TOKENIZER, "sha256": tokenizer_digest(directory)}
        return ChunkingProfile(measure, most, overlap, locator=st.model, window=window)
    if embedder.kind == "openai":
        window = embedder.openai.max_input_tokens if embedder.openai is not None else None
        name = embedder.openai.model if embedder.openai is not None else ""
        most, overlap = limits(embedder.kind, window, chunking.max_tokens, chunking.overlap_tokens, model=name)
        return ChunkingProfile(ESTIMATE_MEASURE, most, overlap, window=window)
    if chunking.max_tokens is None and chunking.overlap_tokens is None:
        return LEGACY
    most, overlap = limits(embedder.kind, None, chunking.max_tokens, chunking.overlap_tokens)
    return ChunkingProfile(ESTIMATE_MEASURE, most, overlap)


def check_chunking(embedder: EmbedderSpec, chunking: ChunkingSpec) -> ChunkingError | None:
    """What is wrong with a pipeline's chunk settings for its embedder, checked when the code location loads (None:
    nothing, or a model that is not on this host: its window is checked when a run resolves it)."""
    window: int | None = None
    name = ""
    if embedder.kind == "sentence_transformers":
        name = (embedder.sentence_transformers or SentenceTransformerSpec()).model
        try:
            window = model_window(model_directory(name))
        except ValueError:
            return None
    elif embedder.kind == "openai" and embedder.openai is not None:
        window, name = embedder.openai.max_input_tokens, embedder.openai.model
    try:
        limits(embedder.kind, window, chunking.max_tokens, chunking.overlap_tokens, model=name)
    except ChunkingError as exc:
        return exc
    return None


def counter_for(profile: ChunkingProfile) -> Count:
    """The measure a profile's chunks were cut with; TokenizerMismatch when this host's tokenizer differs."""
    if profile.kind == CHARS:
        return len
    if profile.kind == ESTIMATE:
        return estimate_tokens
    if profile.kind == TOKENIZER:
        directory = model_directory(profile.locator)
        found = tokenizer_digest(directory)
        if found != profile.measure.get("sha256"):
            raise TokenizerMismatch(
                f"the tokenizer of {profile.locator!r} on this host ({found[:12]}) is not the one chunking profile "
                f"{profile.digest[:12]} was cut with ({str(profile.measure.get('sha256'))[:12]}); install the same "
                "model files"
            )
        return tokenizer_counter(directory)
    raise ValueError(f"unknown chunk measure {profile.kind!r} in chunking profile {profile.digest[:12]}")
