"""shadow_embeddings: a model version's corpus embedded and indexed as a Dagster backfill, one shard per partition.

A backfill of every partition (the UI's Materialize → all partitions, or GraphQL `launchPartitionBackfill`) spreads
the re-embedding for a new model over Dagster's run queue and launchers: runs in parallel up to the concurrency
pool's limit, each on its own worker (a process, a container, a Kubernetes Job), each resumable. The model version
is the run's `runtime_ops/model_version` tag, else the candidate.
"""

import time
from contextlib import AbstractContextManager

import dagster as dg

from runtime_ops.embedders.cores import limited_cores
from runtime_ops.observability.steps import observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import io_retry
from runtime_ops.serving.vector_store import pipeline_vectors
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.embeddings import Shard
from runtime_ops.store.registry.registry import Registry
from runtime_ops.tags import CANDIDATE_ALIAS, MODEL_VERSION_TAG

# A partition waits this long for another one's upserts (a shard of a large corpus takes a while to upsert).
GUARD_WAIT_S = 1800.0
GUARD_TTL_MS = 30_000


def shard_partitions(spec: PipelineSpec) -> dg.StaticPartitionsDefinition:
    count = spec.backfill.shards
    return dg.StaticPartitionsDefinition([Shard(i, count).key for i in range(count)])


def target_version(context: dg.AssetExecutionContext, registry: Registry) -> int:
    tagged = context.run.tags.get(MODEL_VERSION_TAG)
    if tagged is not None:
        if not tagged.isdigit() or registry.get_model(int(tagged)) is None:
            raise dg.Failure(
                f"run tag {MODEL_VERSION_TAG}={tagged!r} names no registered model version of pipeline "
                f"{registry.pipeline}: tag the backfill with a version the registry has",
                allow_retries=False,
            )
        return int(tagged)
    candidate = registry.alias(CANDIDATE_ALIAS)
    if candidate is None:
        raise dg.Failure(
            f"no model version to embed: tag the backfill {MODEL_VERSION_TAG}=<version>, or train a candidate "
            "first (embedding_model)",
            allow_retries=False,
        )
    return int(candidate)


def fill_partition(
    context: dg.AssetExecutionContext, store: StateStore, locks: LocksResource, spec: PipelineSpec
) -> dg.MaterializeResult:
    # numpy: kept out of the code location's load
    from runtime_ops.serving.shards import fill_shard

    version = target_version(context, store.registry)
    shard = Shard(int(context.partition_key), spec.backfill.shards)
    vectors = pipeline_vectors(spec)
    locker = locks.locker()

    def guard() -> AbstractContextManager[object]:
        return locker.hold(spec.lock(f"index-fill:v{version}"), ttl_ms=GUARD_TTL_MS, wait_s=GUARD_WAIT_S)

    started = time.monotonic()
    try:
        with limited_cores(spec.backfill.cores):
            state = fill_shard(store, vectors, version, shard, guard=guard, log=context.log.info, run_id=context.run_id)
    except ValueError as exc:  # a plan of another shard count: retrying cannot help
        raise dg.Failure(str(exc), allow_retries=False) from None
    progress = state.progress
    return dg.MaterializeResult(
        metadata={
            "model_version": dg.MetadataValue.int(version),
            "index_id": dg.MetadataValue.int(state.index_id),
            "shard": f"{shard.index} of {shard.count} (chunk id mod {shard.count} = {shard.index})",
            "embedded_now": dg.MetadataValue.int(state.embedded),
            "indexed": dg.MetadataValue.int(state.upserted),
            "shards_filled": dg.MetadataValue.int(len(progress.filled)),
            "shards_planned": dg.MetadataValue.int(progress.count),
            "cores": dg.MetadataValue.int(spec.backfill.cores),
            "index_complete": state.finished or state.already_ready,
            "vector_store": vectors.describe(),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
        },
        data_version=dg.DataVersion(f"v{version}-i{state.index_id}"),
    )


def build_shadow_embeddings(spec: PipelineSpec, embedding_model: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.asset_path("shadow_embeddings"),
        deps=[embedding_model],
        partitions_def=shard_partitions(spec),
        pool=spec.backfill.pool,
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "serving"},
        retry_policy=io_retry(spec.retry_delay_s),
        description=f"A model version's index filled as a backfill: each of the {spec.backfill.shards} partitions "
        "embeds the chunks whose id modulo the shard count is its number (only those without a vector: a killed run "
        "resumes) and upserts them into the version's index; the last one replays the change feed and marks the "
        "index ready. Until every partition is materialized a promotion of that version is refused. Materialize all "
        f"partitions for the candidate (or tag the backfill {MODEL_VERSION_TAG}); pool `{spec.backfill.pool}` "
        "bounds how many run at once.",
    )
    @observed
    def shadow_embeddings(
        context: dg.AssetExecutionContext, state: StateStoreResource, locks: LocksResource
    ) -> dg.MaterializeResult:
        return fill_partition(context, state.store().scoped(spec.name), locks, spec)

    return shadow_embeddings
