"""The landing sensor: one dynamic partition and one run per batch of new object versions."""

import json

import dagster as dg

from runtime_ops.documents.partitions import landing_batches
from runtime_ops.documents.scan import scan
from runtime_ops.resources.landing_resource import LandingResource
from runtime_ops.resources.state import StateStoreResource
from runtime_ops.store.store import NewObject

BATCH_TAG = "runtime_ops/batch_id"


def _batch_request(batch_id: str, n_objects: int) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=batch_id,
        partition_key=batch_id,
        tags={BATCH_TAG: batch_id, "runtime_ops/objects": str(n_objects)},
    )


@dg.sensor(
    job_name="ingest_job",
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Scans the landing folder or S3 prefix in key order from a cursor, records new object "
    "versions as one landing batch (one dynamic partition) and launches its ingestion (run key = batch id).",
)
def landing_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource, landing: LandingResource
) -> dg.SensorResult | dg.SkipReason:
    store = state.store()
    cursor = json.loads(context.cursor) if context.cursor else {}
    run_requests: list[dg.RunRequest] = []
    partitions: list[str] = []

    # A batch recorded by a tick whose result never reached Dagster (crash, timeout) is re-requested; the
    # run key makes a second request for a batch that did launch a no-op.
    for batch in store.batches(status="pending"):
        runs = context.instance.get_run_records(dg.RunsFilter(tags={BATCH_TAG: batch["id"]}), limit=1)
        if runs:
            store.mark_batch(batch["id"], "launched", run_id=runs[0].dagster_run.run_id)
        else:
            partitions.append(batch["id"])
            run_requests.append(_batch_request(batch["id"], batch["n_objects"]))

    source = landing.source()
    result = scan(
        source,
        store.known_versions,
        start_after=cursor.get("start_after"),
        max_new=landing.batch_max_objects,
        max_keys=landing.scan_max_keys,
    )
    if result.new:
        batch = store.record_batch(
            source.uri,
            [NewObject(o.key, o.version, o.size, o.last_modified) for o in result.new],
        )
        if batch is not None:
            partitions.append(batch["id"])
            run_requests.append(_batch_request(batch["id"], batch["n_objects"]))
            context.log.info(f"landing batch {batch['id']}: {batch['n_objects']} new object versions")
    new_cursor = json.dumps({"start_after": result.next_start_after})
    if not run_requests:
        context.update_cursor(new_cursor)
        return dg.SkipReason(f"no new object versions ({result.listed} keys listed from {source.uri})")
    return dg.SensorResult(
        run_requests=run_requests,
        cursor=new_cursor,
        dynamic_partitions_requests=[landing_batches.build_add_request(partitions)],
    )
