"""The corpus sensor: retrain when the retrain policy says so (growth, drift, a request), not on every batch."""

from typing import Any

import dagster as dg

from runtime_ops.embedders.declaration import declaration_change, declaration_digest, declared_fields, recorded_fields
from runtime_ops.embedders.token_counts import declared_profile
from runtime_ops.jobs import AssetJob
from runtime_ops.pipeline.spec import EmbedderSpec, PipelineSpec, RetrainSpec
from runtime_ops.policies.retrain import (
    Decision,
    DriftFacts,
    ModelFacts,
    PendingRequest,
    RetrainFacts,
    RetrainPolicy,
    should_retrain,
)
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.changes import CorpusChanges
from runtime_ops.store.corpus.ledger import Ledger
from runtime_ops.store.corpus.profiles import ChunkingProfiles
from runtime_ops.store.operations.retraining import Retraining
from runtime_ops.store.serving.indexes import Indexes
from runtime_ops.tags import LIFECYCLE_TAG, RETRAIN_KEY_TAG, RETRAIN_TRIGGER_TAG

ACTIVE_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def active_lifecycle_run(instance: dg.DagsterInstance, pipeline: str) -> str | None:
    """A queued or running lifecycle run (train, promotion, index, rollback, re-embed) of this pipeline."""
    records = instance.get_run_records(dg.RunsFilter(tags={LIFECYCLE_TAG: pipeline}, statuses=ACTIVE_STATUSES), limit=1)
    return records[0].dagster_run.run_id if records else None


def retrain_policy(spec: RetrainSpec, *, trainable: bool = True) -> RetrainPolicy:
    """The pipeline's retrain policy. A pretrained embedder is not fitted to the corpus, so corpus growth and drift
    cannot make a better one: only requests (and the schedule, and a switch of embedder) retrain it."""
    return RetrainPolicy(
        growth_fraction=spec.growth_fraction if trainable else None,
        drift_threshold=spec.drift_threshold if trainable else None,
        oov_threshold=spec.oov_threshold if trainable else None,
        on_alert=spec.on_alert,
        min_signal_chunks=spec.min_signal_chunks,
    )


def embedder_switch(spec: EmbedderSpec, latest: dict[str, Any] | None) -> str | None:
    """What the declared embedder changed from the newest model's (None: the same model, or no model yet): any
    field that makes other vectors (see `embedders.declaration`), compared by digest."""
    if latest is None:
        return None
    return declaration_change(declared_fields(spec), recorded_fields(latest.get("params") or {}))


def chunking_switch(profiles: ChunkingProfiles, spec: PipelineSpec, latest: dict[str, Any] | None) -> str | None:
    """What the declared chunking changed from the newest model's (None: the same, or no model yet): a new window
    or new chunk settings are a new candidate, like a new embedder."""
    if latest is None:
        return None
    declared = declared_profile(spec.embedder, spec.chunking)
    current = profiles.get(profiles.of_model(int(latest["version"])))
    if declared.digest == current.digest:
        return None
    return f"the chunking changed from {current.describe()} to {declared.describe()}"


def declared_digest(spec: PipelineSpec) -> str:
    return declared_profile(spec.embedder, spec.chunking).digest


def retrain_facts(store: StateStore, policy: RetrainPolicy) -> RetrainFacts:
    """What the retrain policy decides on, read from a pipeline-scoped store."""
    revision = store.ledger.corpus_revision()
    latest = store.registry.latest_model()
    model = (
        ModelFacts(version=latest["version"], chunks=latest["n_chunks"], corpus_revision=latest["corpus_revision"])
        if latest is not None
        else None
    )
    drift = (
        DriftFacts(**store.retraining.max_drift_since(model.corpus_revision, min_chunks=policy.min_signal_chunks))
        if model is not None
        else DriftFacts()
    )
    sources = ("alert", "manual") if policy.on_alert else ("manual",)
    row = store.retraining.pending_request(sources=sources)
    request = (
        PendingRequest(id=row["id"], source=row["source"], corpus_revision=row["corpus_revision"], reason=row["reason"])
        if row is not None
        else None
    )
    return RetrainFacts(
        model=model,
        # Growth is measured in the chunks the newest model reads (another profile cuts the same corpus otherwise).
        chunks=store.documents.current_chunk_count(
            profile=store.profiles.of_model(model.version) if model is not None else None
        ),
        corpus_revision=revision,
        drift=drift,
        request=request,
    )


def decide_retrain(store: StateStore, spec: PipelineSpec) -> Decision:
    policy = retrain_policy(spec.retrain, trainable=spec.embedder.trainable)
    return should_retrain(policy, retrain_facts(store, policy))


def request_retrain(
    retraining: Retraining, ledger: Ledger, *, reason: str, requested_by: str | None = None, source: str = "manual"
) -> int:
    """Ask the corpus sensor for one retrain (consumed by its next tick that is not waiting for a lifecycle run);
    `source` "alert" requests are honoured only while retrain.on_alert is on. Returns the request id."""
    return retraining.request_retrain(
        source=source, reason=reason, requested_by=requested_by, corpus_revision=ledger.corpus_revision()
    )


def serving_run_active(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    """A queued or running run that materializes `key` (automation's, a job's or the UI's)."""
    for record in instance.get_run_records(dg.RunsFilter(statuses=ACTIVE_STATUSES)):
        selection = record.dagster_run.asset_selection
        if selection and key in selection:
            return record.dagster_run.run_id
    return None


def removals_sync(
    context: dg.SensorEvaluationContext,
    indexes: Indexes,
    changes: CorpusChanges,
    spec: PipelineSpec,
    index_job: AssetJob,
) -> dg.RunRequest | None:
    """An index_job run when documents left the corpus (deleted at the landing, through S3 events or the webhook)
    and the serving index still holds them. New documents need no such run: automation follows their ingestion,
    but a deletion materializes nothing it could follow. One run per feed position (run key)."""
    index = indexes.current_index()
    if index is None or changes.pending(int(index["synced_seq"]), op="remove") == 0:
        return None
    if serving_run_active(context.instance, dg.AssetKey(spec.asset_path("document_embeddings"))):
        return None  # that run applies the removals too
    key = f"sync:removals:seq{changes.head()}"
    context.log.info(
        f"documents left the corpus since index #{index['id']} last synced: {index_job.name}, run key {key}"
    )
    return dg.RunRequest(job_name=index_job.name, run_key=key)


def build_corpus_sensor(spec: PipelineSpec, train_job: AssetJob, index_job: AssetJob) -> dg.SensorDefinition:
    @dg.sensor(
        name=spec.qualified("corpus_sensor"),
        jobs=[train_job, index_job],
        minimum_interval_seconds=spec.sensor_interval(30),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Retrains (train_job) when the pipeline's retrain policy says so: the first model, corpus "
        "growth past retrain.growth_fraction, a landing batch's embedding shift or OOV rate past its threshold, "
        "a pending retrain request, or a change of the embedder's declaration (kind, dim, seed, model, endpoint, "
        "...) or of chunking in defs.yaml; each condition once (run key). One lifecycle run at a time. New "
        "documents reach embeddings and the index with the production model through declarative automation; documents "
        "deleted at the landing leave the index through an index_job run.",
    )
    def corpus_sensor(context: dg.SensorEvaluationContext, state: StateStoreResource) -> dg.RunRequest | dg.SkipReason:
        store = state.store().scoped(spec.name)
        if store.ledger.corpus_revision() == 0:
            return dg.SkipReason("no ingested documents yet")
        running = active_lifecycle_run(context.instance, spec.name)
        if running:
            return dg.SkipReason(f"waiting for lifecycle run {running} to finish")

        def retrain(trigger: str, key: str, reason: str) -> dg.RunRequest:
            context.log.info(f"retrain ({trigger}): {reason}; run key {key}")
            return dg.RunRequest(
                job_name=train_job.name, run_key=key, tags={RETRAIN_TRIGGER_TAG: trigger, RETRAIN_KEY_TAG: key}
            )

        latest = store.registry.latest_model()
        switched = embedder_switch(spec.embedder, latest)
        if switched:
            revision = store.ledger.corpus_revision()
            digest = declaration_digest(declared_fields(spec.embedder))[:16]
            return retrain("embedder", f"retrain:embedder:{digest}:rev{revision}", switched)
        try:
            rechunked = chunking_switch(store.profiles, spec, latest)
        except ValueError as exc:  # the declared model is not on this host, or a window it cannot read
            return dg.SkipReason(f"the declared chunking cannot be resolved: {exc}")
        if rechunked:
            revision = store.ledger.corpus_revision()
            return retrain("chunking", f"retrain:chunking:{declared_digest(spec)[:16]}:rev{revision}", rechunked)
        policy = retrain_policy(spec.retrain, trainable=spec.embedder.trainable)
        facts = retrain_facts(store, policy)
        decision = should_retrain(policy, facts)
        if not decision.retrain or decision.trigger is None:
            return removals_sync(context, store.indexes, store.changes, spec, index_job) or dg.SkipReason(
                decision.reason
            )
        if decision.trigger in ("alert", "manual") and facts.request is not None:
            # Consumed once, before the run is requested: a later tick in the same state decides anew.
            store.retraining.consume_request(facts.request.id, decision.key)
        return retrain(decision.trigger, decision.key, decision.reason)

    return corpus_sensor
