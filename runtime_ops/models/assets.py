"""Models: train a candidate embedder and promote it behind the gate (evaluating it: `models/evaluate.py`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg

from runtime_ops.labels import version_label
from runtime_ops.pipeline.chunking import LEGACY, ChunkingProfile
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.store import StateStore

if TYPE_CHECKING:
    from runtime_ops.locks.base import Locker


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

    def texts(self, store: StateStore, profile: int) -> Iterator[str]:
        for page in store.documents.iter_current_chunks(profile=profile):
            self.chunks += len(page)
            for _, key, text in page:
                self.documents.add(key)
                yield text


def _fit_lsa(config: TrainConfig, texts: Iterator[str], spec: PipelineSpec) -> tuple[bytes, dict[str, Any], int, dict]:
    from runtime_ops.embedders.lsa import EmbedderParams, train_embedder
    from runtime_ops.embedders.sampling import bounded_sample

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
    from runtime_ops.embedders.reference import reference_bytes
    from runtime_ops.embedders.registry import pretrained_embedder, runtime_params

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
    from runtime_ops.documents.chunk_profiles import declared, ensure_chunks
    from runtime_ops.embedders.lsa import digest

    revision = store.ledger.corpus_revision()
    # The candidate reads the chunks of the declared chunking: a profile new to the corpus (an embedder with
    # another window) cuts the current documents now, beside the chunks production keeps serving.
    try:
        profile_id, profile = declared(store, spec)
    except ValueError as exc:
        raise dg.Failure(f"{spec.source or spec.name}: {exc}", allow_retries=False) from None
    rechunked = ensure_chunks(store, profile_id, profile=profile, log=context.log.info)
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
        data, params, dim, extra = _fit_lsa(config, corpus.texts(store, profile_id), spec)
    else:
        data, params, dim, extra = _reference(spec)
        for _ in corpus.texts(store, profile_id):  # a pretrained model reads no text: only the counts it records
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
    store.registry.set_alias("candidate", model["version"], actor=f"run:{context.run_id}", run_id=context.run_id)
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


class PromotionConfig(dg.Config):
    approval_id: str | None = None
    dry_run: bool = False  # log the transitions the promotion would make; change nothing


PROMOTION_RETRY_CAP_S = 30.0


def gate_waits_in_this_run(context: dg.AssetExecutionContext, spec: PipelineSpec) -> bool:
    """Whether this run's own human_approval check found the candidate waiting for a person (a run that asked
    the gate, like train_job); a run that selected production_model without the check gets a refusal instead."""
    key = dg.AssetCheckKey(dg.AssetKey(spec.asset_path("evaluation_report")), "human_approval")
    records = context.instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    if not records or records[0].run_id != context.run_id:
        return False
    evaluation = records[0].event.asset_check_evaluation if records[0].event else None
    return evaluation is not None and not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN


def promote(
    context: dg.AssetExecutionContext, config: PromotionConfig, store: StateStore, locker: Locker, spec: PipelineSpec
) -> dg.MaterializeResult | None:
    """The promotion saga; None when this run's gate found the candidate waiting for a person (nothing to do
    until the decision), a one-line `dg.Failure` when promotion is refused."""
    from runtime_ops.approvals.gate import PromotionRefused, verify_promotion
    from runtime_ops.locks.base import LockError
    from runtime_ops.locks.promotion import promotion_lease
    from runtime_ops.models.promotion import StoreJournal, backfill_refusal, promotion_steps, saga_id
    from runtime_ops.saga.engine import CompensationFailed, SagaFailed, plan, run
    from runtime_ops.serving.vector_store import pipeline_vectors

    approval_id = config.approval_id or context.run.tags.get("runtime_ops/approval_id")
    try:
        version, request = verify_promotion(store, approval_id=approval_id)
    except PromotionRefused as exc:
        if exc.status == "pending" and approval_id is None and gate_waits_in_this_run(context, spec):
            production = store.registry.alias("production")
            context.log.info(
                f"production stays at {version_label(production)}: {str(exc).removeprefix('refusing to promote: ')}. "
                "The approvals sensor launches the promotion once it is approved."
            )
            return None
        # A refusal is final for this run (a new decision launches a new one): one line, never retried.
        raise dg.Failure(str(exc), allow_retries=False) from None
    previous = store.registry.alias("production")
    vectors = pipeline_vectors(spec)
    refusal = backfill_refusal(store, vectors, version)
    if refusal is not None:
        again = f"materialize production_model with approval {request['id']}"
        raise dg.Failure(f"{refusal} ({again})", allow_retries=False)
    if config.dry_run:
        steps = promotion_steps(store, vectors, version=version, request=request, lease=None, run_id=context.run_id)
        lines = plan(steps, {})
        for line in lines:
            context.log.info(f"dry run: {line}")
        return dg.MaterializeResult(
            metadata={
                "dry_run": True,
                "plan": dg.MetadataValue.md("\n".join(f"- {x}" for x in lines)),
                "version": dg.MetadataValue.int(previous or 0),
            }
        )
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    try:
        with promotion_lease(locker, store.pipeline) as lease:
            steps = promotion_steps(
                store,
                vectors,
                version=version,
                request=request,
                lease=lease,
                run_id=context.run_id,
                log=context.log.info,
            )
            outcome = run(saga_id(request), steps, {}, StoreJournal(store, context.run_id), on_event=context.log.info)
    except (LockError, SagaFailed) as exc:
        # Fail closed; retry with capped exponential backoff (Dagster's own backoff has no cap).
        wait = min(PROMOTION_RETRY_CAP_S, 2.0 * 2**context.retry_number)
        raise dg.RetryRequested(max_retries=6, seconds_to_wait=wait) from exc
    except CompensationFailed as exc:
        raise dg.Failure(f"promotion needs an operator: {exc}", allow_retries=False) from None
    model = store.registry.get_model(version)
    assert model is not None
    return dg.MaterializeResult(
        metadata={
            "version": dg.MetadataValue.int(version),
            "previous_version": dg.MetadataValue.int(previous or 0),
            "digest": model["digest"],
            "approval_id": request["id"],
            "approved_by": request["decided_by"] or "policy",
            "approval_kind": request["kind"],
            "saga": outcome.saga_id,
            "fence": dg.MetadataValue.int(lease.fence),
        },
        data_version=dg.DataVersion(model["digest"][:16]),
    )
