"""The training step of a pipeline's `embedding_model` asset: fit (lsa) or register (a pretrained model) a candidate
embedder on the current chunks, versioned by digest (evaluating it: `models/evaluation.py`; promoting it:
`models/promotion.py`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from runtime_ops.documents.chunk_profiles import declared, ensure_chunks
from runtime_ops.embedders.reference import reference_bytes
from runtime_ops.embedders.registry import pretrained_embedder, runtime_params
from runtime_ops.embedders.sampling import bounded_sample
from runtime_ops.pipeline.chunking import LEGACY, ChunkingProfile
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.documents import Documents
from runtime_ops.tags import CANDIDATE_ALIAS


class TrainConfig(dg.Config):
    """Overrides of the pipeline's `embedder` settings for one run (unset: the defs.yaml value)."""

    dim: int | None = None
    max_features: int | None = None
    seed: int | None = None
    train_sample: int | None = None


@dataclass
class _CorpusPass:
    """Chunks and documents counted while the texts stream by (one pass serves the sample and the stats)."""

    chunks: int = 0
    documents: set[str] = field(default_factory=set)

    def texts(self, documents: Documents, profile: int) -> Iterator[str]:
        for page in documents.iter_current_chunks(profile=profile):
            self.chunks += len(page)
            for _, key, text in page:
                self.documents.add(key)
                yield text


def _fit_lsa(config: TrainConfig, texts: Iterator[str], spec: PipelineSpec) -> tuple[bytes, dict[str, Any], int, dict]:
    # numpy: kept out of the code location's load
    from runtime_ops.embedders.lsa import EmbedderParams, train_embedder

    e = spec.embedder
    params = EmbedderParams(
        dim=config.dim if config.dim is not None else e.dim,
        max_features=config.max_features if config.max_features is not None else e.max_features,
        seed=config.seed if config.seed is not None else e.seed,
    )
    limit = config.train_sample if config.train_sample is not None else e.train_sample
    sample, seen = bounded_sample(texts, limit, seed=params.seed)
    embedder = train_embedder(sample, params)
    recorded = {"kind": "lsa", **params.to_dict(), "train_sample": limit}
    return embedder.to_bytes(), recorded, embedder.dim, {"fitted_on_chunks": len(sample), "sampled_from": seen}


def _reference(spec: PipelineSpec) -> tuple[bytes, dict[str, Any], int, dict]:
    """A pretrained model is not fitted here: its candidate is its identity, checked by embedding a probe text
    (which fails early, naming the endpoint or model, when it cannot be used)."""
    embedder = pretrained_embedder(spec.embedder)
    probe = embedder.embed(["runtime_ops probe: is this embedder reachable and of the declared size?"])
    identity = embedder.identity()  # pyright: ignore[reportAttributeAccessIssue]  # pretrained kinds have it
    if probe.shape != (1, embedder.dim):
        raise dg.Failure(f"embedder {identity} returned shape {probe.shape} for one text", allow_retries=False)
    return reference_bytes(identity), {**identity, **runtime_params(spec.embedder)}, embedder.dim, {}


def version_digest(artifact_digest: str, profile: ChunkingProfile) -> str:
    """What identifies a model version: its artifact and the chunks it reads. A model of the character chunking
    of old keeps its artifact's digest, as versions registered before chunking profiles did."""
    if profile == LEGACY:
        return artifact_digest
    return hashlib.sha256(f"{artifact_digest}:chunking:{profile.digest}".encode()).hexdigest()


def train_candidate(
    context: dg.AssetExecutionContext, config: TrainConfig, store: StateStore, spec: PipelineSpec
) -> dg.MaterializeResult:
    # numpy: kept out of the code location's load
    from runtime_ops.embedders.lsa import digest

    revision = store.ledger.corpus_revision()
    # The candidate reads the chunks of the declared chunking: a profile new to the corpus (an embedder with
    # another window) cuts the current documents now, beside the chunks production keeps serving.
    try:
        profile_id, profile = declared(store.profiles, spec)
    except ValueError as exc:
        raise dg.Failure(f"{spec.source or spec.name}: {exc}", allow_retries=False) from None
    rechunked = ensure_chunks(store.documents, store.profiles, profile_id, profile=profile, log=context.log.info)
    n_chunks = store.documents.current_chunk_count(profile=profile_id)
    if n_chunks < 2:
        raise dg.Failure(
            f"cannot train: the current corpus of pipeline {spec.name} has {n_chunks} chunk(s); land some "
            f"documents in {spec.landing.uri} first",
            allow_retries=False,
        )
    started = time.monotonic()
    corpus = _CorpusPass()
    if spec.embedder.trainable:
        data, params, dim, extra = _fit_lsa(config, corpus.texts(store.documents, profile_id), spec)
    else:
        data, params, dim, extra = _reference(spec)
        for _ in corpus.texts(
            store.documents, profile_id
        ):  # a pretrained model reads no text: only the counts it records
            pass
    n_chunks, n_documents = corpus.chunks, len(corpus.documents)
    train_s = time.monotonic() - started
    artifact_digest = digest(data)
    model_digest = version_digest(artifact_digest, profile)
    artifact_id = store.artifacts.put_artifact("embedder", data, artifact_digest)
    model, created = store.registry.register_model(
        digest=model_digest,
        artifact_id=artifact_id,
        params=params,
        n_documents=n_documents,
        n_chunks=n_chunks,
        corpus_revision=revision,
        run_id=context.run_id,
        chunking_profile=profile_id,
    )
    store.registry.set_alias(CANDIDATE_ALIAS, model["version"], actor=f"run:{context.run_id}", run_id=context.run_id)
    context.log.info(
        f"{spec.embedder.kind} model v{model['version']} ({'new' if created else 'same bytes as an earlier version'}) "
        f"for {n_chunks} chunks in {train_s:.2f}s"
    )
    return dg.MaterializeResult(
        metadata={
            "version": dg.MetadataValue.int(model["version"]),
            "kind": spec.embedder.kind,
            "digest": model_digest,
            "new_version": created,
            "dim": dg.MetadataValue.int(dim),
            "chunks": dg.MetadataValue.int(n_chunks),
            "documents": dg.MetadataValue.int(n_documents),
            "corpus_revision": dg.MetadataValue.int(revision),
            "train_seconds": dg.MetadataValue.float(round(train_s, 3)),
            "chunking": profile.describe(),
            "rechunked_documents": dg.MetadataValue.int(rechunked),
            "size_bytes": dg.MetadataValue.int(len(data)),
            **{name: dg.MetadataValue.int(value) for name, value in extra.items()},
        },
        data_version=dg.DataVersion(model_digest[:16]),
    )
