"""The landing sensor: one dynamic partition and one run per batch of new object versions."""

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster._core.storage.tags import PARENT_RUN_ID_TAG, WILL_RETRY_TAG

from runtime_ops.documents.batch_runs import MAX_LAUNCHES, BatchRun, decide, relaunch_key
from runtime_ops.documents.events import ObjectEvent, parse_body, plan_versions, relative_key
from runtime_ops.documents.partitions import landing_batches
from runtime_ops.documents.scan import ScanResult, scan
from runtime_ops.jobs import AssetJob
from runtime_ops.landing import LandingSource, S3LandingSource, is_ignored_key
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.landing import LandingResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.runs import run_tagged
from runtime_ops.store import NewObject, StateStore
from runtime_ops.store.corpus.documents import Documents
from runtime_ops.store.corpus.ledger import Ledger
from runtime_ops.tags import BATCH_TAG, OBJECTS_TAG

if TYPE_CHECKING:
    from runtime_ops.landing.queue import EventQueue

KNOWN_CHUNK = 1000  # keys per ledger lookup


# ---------------------------------------------------------------------------------------------- event mode


@dataclass
class EventTick:
    """What one event-mode poll did (for the tick's log line and skip reason)."""

    batch: dict[str, Any] | None = None
    messages: int = 0
    versions: int = 0  # distinct (key, version) announced in this poll
    known: int = 0  # of those, already in the ledger (redeliveries, or seen by listing mode)
    duplicates: int = 0  # repeated (key, version) within the poll
    skipped: int = 0  # other bucket, outside the prefix, ignored names, created-then-deleted
    ignored: int = 0  # test events, removals of keys recreated later in the poll, other event types
    deleted: int = 0  # keys deleted at the landing whose current document was removed from the corpus
    malformed: int = 0
    delete_failed: int = 0

    def describe(self) -> str:
        return (
            f"{self.messages} messages: {self.versions} object versions ({self.known} already recorded, "
            f"{self.duplicates} duplicates), {self.deleted} documents deleted, {self.ignored} ignored records, "
            f"{self.skipped} outside the landing, {self.malformed} malformed"
        )


def drain_events(
    queue: "EventQueue",
    documents: Documents,
    ledger: Ledger,
    source: S3LandingSource,
    *,
    max_objects: int,
    log: logging.Logger | Any,
) -> EventTick:
    """One event-mode poll: receive up to `max_objects` messages, record the new object versions they announce
    as one batch, then delete the messages.

    Messages are deleted only after `record_batch` committed (or when nothing in them needed recording), so a
    crash in between redelivers them after the visibility timeout, and the ledger's (key, version) uniqueness
    makes the redelivery record nothing. Malformed bodies are logged and deleted (they would never parse).
    """
    tick = EventTick()
    messages = queue.receive(max_objects)
    tick.messages = len(messages)
    if not messages:
        return tick
    events: list[ObjectEvent] = []
    for message in messages:
        parsed = parse_body(message.body)
        if parsed.malformed:
            tick.malformed += 1
            log.warning(
                f"landing events: dropping malformed SQS message {message.message_id} "
                f"({'; '.join(parsed.errors)}): {message.body[:300]!r}"
            )
        elif parsed.errors:
            log.warning(f"landing events: message {message.message_id}: skipped records: {'; '.join(parsed.errors)}")
        events.extend(parsed.events)
        tick.ignored += len(parsed.ignored)

    def key_of(event: ObjectEvent) -> str | None:
        key = relative_key(event.key, source.prefix) if event.bucket == source.bucket else None
        if key is None or is_ignored_key(key):
            tick.skipped += 1
            return None
        return key

    plan = plan_versions(events, key_of=key_of)
    # A key deleted at the landing stops being current, and the serving indexes drop it (the change feed).
    for key in plan.deleted:
        if documents.remove_key(key, reason="deleted at the landing (S3 ObjectRemoved event)") is not None:
            tick.deleted += 1
    tick.ignored += plan.removals - len(plan.deleted)
    tick.skipped += plan.dropped_removed
    tick.duplicates = plan.duplicates
    tick.versions = len(plan.objects)
    keys = list(dict.fromkeys(o.key for o in plan.objects))
    known: set[tuple[str, str]] = set()
    for start in range(0, len(keys), KNOWN_CHUNK):
        known |= ledger.known_versions(keys[start : start + KNOWN_CHUNK])
    new = [o for o in plan.objects if (o.key, o.version) not in known]
    tick.known = tick.versions - len(new)
    if new:
        tick.batch = ledger.record_batch(
            source.uri, [NewObject(o.key, o.version, o.size, o.last_modified) for o in new]
        )
    # Committed (or nothing to commit): every message of this poll is now safe to acknowledge.
    receipts = [m.receipt_handle for m in messages]
    try:
        tick.delete_failed = len(queue.delete(receipts))
    except Exception as exc:  # the batch is durable; the messages come back later and are recognised as recorded
        tick.delete_failed = len(receipts)
        log.warning(f"landing events: could not delete {len(receipts)} SQS messages ({exc}); they will be redelivered")
    return tick


GONE_REASON = "deleted from the landing (not in its listing)"
MISSED = "missed by the event notifications"


def list_slice(
    documents: Documents,
    ledger: Ledger,
    source: LandingSource,
    spec: PipelineSpec,
    start_after: str | None,
    gone_reason: str,
) -> tuple[ScanResult, list[str], dict[str, Any] | None]:
    """One slice of the landing's listing from `start_after`: its unknown object versions recorded as a batch,
    and the documents of keys the listing no longer has removed from the corpus (and, through the change feed,
    the serving index). Listing mode runs it every tick, event mode's reconciliation every period."""
    result = scan(
        source,
        ledger.known_versions,
        start_after=start_after,
        max_new=spec.landing.batch_max_objects,
        max_keys=spec.landing.scan_max_keys,
        current=lambda after, upto: documents.current_keys_between(after, upto, source=source.uri),
    )
    removed = [k for k in result.gone if documents.remove_key(k, reason=gone_reason) is not None]
    batch = None
    if result.new:
        batch = ledger.record_batch(
            source.uri, [NewObject(o.key, o.version, o.size, o.last_modified) for o in result.new]
        )
    return result, removed, batch


def reconcile(
    context: dg.SensorEvaluationContext,
    documents: Documents,
    ledger: Ledger,
    source: S3LandingSource,
    spec: PipelineSpec,
    cursor: dict[str, Any],
) -> dict[str, Any] | None:
    """Event mode's safety net: every `landing.reconcile_every` a listing sweep walks the bucket (a slice per
    tick, from `cursor["sweep_after"]`), recording object versions no notification announced (a lost, expired or
    purged message) as a batch and removing documents whose keys are gone. The ledger's (key, version)
    uniqueness makes an object both notified and listed ingest once. Updates `cursor`; returns the new batch."""
    every = spec.landing.reconcile_every_s
    if every is None:
        return None
    now = time.time()
    if "swept_at" not in cursor:  # the first sweep comes one period after event mode starts, not on its first tick
        cursor["swept_at"] = now
        return None
    if "sweep_after" not in cursor and now - float(cursor["swept_at"]) < every:
        return None
    result, removed, batch = list_slice(
        documents, ledger, source, spec, cursor.get("sweep_after"), f"{GONE_REASON}, {MISSED}"
    )
    if result.next_start_after is None:  # the sweep reached the end of the listing: done until the next one
        cursor.pop("sweep_after", None)
        cursor["swept_at"] = now
    else:
        cursor["sweep_after"] = result.next_start_after
    if batch is not None or removed:
        where = f"batch {batch['id']}" if batch else "no batch"
        context.log.warning(
            f"landing sweep of {source.uri}: {len(result.new)} object versions and {len(removed)} deletions were "
            f"{MISSED}; {where}"
        )
    return batch


def _batch_request(spec: PipelineSpec, batch_id: str, n_objects: int) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=batch_id,
        partition_key=batch_id,
        tags={**spec.tags, BATCH_TAG: batch_id, OBJECTS_TAG: str(n_objects)},
    )


def _relaunch(
    context: dg.SensorEvaluationContext, store: StateStore, spec: PipelineSpec, batch: dict[str, Any]
) -> tuple[dg.RunRequest | None, bool]:
    """The run request that relaunches a launched batch whose ingestion failed for good (None: nothing to do),
    and whether the batch's run is still waiting in the run queue. After MAX_LAUNCHES the batch is marked failed,
    with an error naming the run to re-execute."""
    runs = context.instance.get_runs(dg.RunsFilter(tags={BATCH_TAG: batch["id"]}), limit=50)  # newest first
    queued = bool(runs) and runs[0].status in (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED)
    views = [BatchRun(r.status.value, r.tags.get(WILL_RETRY_TAG), is_retry=PARENT_RUN_ID_TAG in r.tags) for r in runs]
    step = decide(views)
    if step == "wait":
        return None, queued
    last = runs[0].run_id if runs else None
    if step == "give_up":
        store.ledger.mark_batch(batch["id"], "failed", run_id=last)
        context.log.error(
            f"landing batch {batch['id']}: its ingestion failed {MAX_LAUNCHES} times (last run {last}); marked "
            f"failed, its {batch['n_objects']} object versions not ingested. Fix the cause (the run's log says it), "
            "then re-execute that run (Dagster UI: the run, Re-execute): the batch is ingested when it succeeds."
        )
        return None, False
    key = relaunch_key(batch["id"], views)
    context.log.warning(
        f"landing batch {batch['id']}: run {last} failed and Dagster will not retry it; launching the batch again "
        f"(run key {key})"
    )
    request = _batch_request(spec, batch["id"], batch["n_objects"])
    return request.with_replaced_attrs(run_key=key), False


def build_landing_sensor(spec: PipelineSpec, ingest_job: AssetJob) -> dg.SensorDefinition:
    @dg.sensor(
        name=spec.qualified("landing_sensor"),
        job=ingest_job,
        minimum_interval_seconds=spec.sensor_interval(15),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Scans {spec.landing.uri} in key order from a cursor (or, with landing.sqs_queue_url, reads "
        "the bucket's S3 event notifications from SQS), records new object versions as one landing batch (one "
        "dynamic partition) and launches its ingestion (run key = batch id).",
    )
    def landing_sensor(
        context: dg.SensorEvaluationContext, state: StateStoreResource, landing: LandingResource
    ) -> dg.SensorResult | dg.SkipReason:
        return landing_tick(context, state.store().scoped(spec.name), landing, spec)

    return landing_sensor


def landing_tick(
    context: dg.SensorEvaluationContext, store: StateStore, landing: LandingResource, spec: PipelineSpec
) -> dg.SensorResult | dg.SkipReason:
    cursor = json.loads(context.cursor) if context.cursor else {}
    run_requests: list[dg.RunRequest] = []
    partitions: list[str] = []

    # A batch recorded by a tick whose result never reached Dagster (crash, timeout) is re-requested; the
    # run key makes a second request for a batch that did launch a no-op.
    for batch in store.ledger.batches(status="pending"):
        run = run_tagged(context.instance, BATCH_TAG, batch["id"])
        if run is not None:
            store.ledger.mark_batch(batch["id"], "launched", run_id=run.run_id)
        else:
            partitions.append(batch["id"])
            run_requests.append(_batch_request(spec, batch["id"], batch["n_objects"]))
    # A launched batch whose run failed for good (not launched at all, retries spent) is relaunched (batch_runs.py).
    waiting: str | None = None
    for batch in store.ledger.batches(status="launched"):
        request, queued = _relaunch(context, store, spec, batch)
        if request is not None:
            run_requests.append(request)
        waiting = waiting or (batch["id"] if queued else None)
    # Backpressure: while a batch's run waits in the run queue, new objects wait where they are (in the queue of
    # events, in the listing) and join the next batch, rather than each tick adding a run behind it.
    if waiting is not None and not run_requests:
        return dg.SkipReason(
            f"landing batch {waiting} is still waiting in the run queue: new object versions join the next batch"
        )

    source = landing.source(spec.landing)
    events_queue = landing.event_queue(spec.landing)
    batches = landing_batches(spec)
    if events_queue is not None:
        if not isinstance(source, S3LandingSource):
            raise ValueError(
                f"pipeline {spec.name}: RUNTIME_OPS_SQS_QUEUE_URL is set (landing.sqs_queue_url: event mode) but "
                f"RUNTIME_OPS_LANDING (landing.uri) = {spec.landing.uri!r} is not an s3:// landing: S3 event "
                "notifications need an S3 bucket; unset one of the two"
            )
        tick = drain_events(
            events_queue,
            store.documents,
            store.ledger,
            source,
            max_objects=spec.landing.batch_max_objects,
            log=context.log,
        )
        if tick.batch is not None:
            partitions.append(tick.batch["id"])
            run_requests.append(_batch_request(spec, tick.batch["id"], tick.batch["n_objects"]))
            context.log.info(f"landing batch {tick.batch['id']}: {tick.batch['n_objects']} new object versions")
        if tick.messages:
            context.log.info(f"landing events from {events_queue.url}: {tick.describe()}")
        swept = reconcile(context, store.documents, store.ledger, source, spec, cursor)
        if swept is not None:
            partitions.append(swept["id"])
            run_requests.append(_batch_request(spec, swept["id"], swept["n_objects"]))
        # The listing cursor (start_after) is left as it is: switching back to listing mode resumes there.
        new_cursor = json.dumps(cursor)
        if not run_requests:
            context.update_cursor(new_cursor)
            return dg.SkipReason(f"no new object versions (event mode, {tick.describe()})")
        return dg.SensorResult(
            run_requests=run_requests,
            cursor=new_cursor,
            dynamic_partitions_requests=[batches.build_add_request(partitions)] if partitions else None,
        )

    result, removed, batch = list_slice(
        store.documents, store.ledger, source, spec, cursor.get("start_after"), GONE_REASON
    )
    if removed:
        context.log.info(f"{len(removed)} documents gone from {source.uri} left the corpus: {', '.join(removed[:5])}")
    if batch is not None:
        partitions.append(batch["id"])
        run_requests.append(_batch_request(spec, batch["id"], batch["n_objects"]))
        context.log.info(f"landing batch {batch['id']}: {batch['n_objects']} new object versions")
    new_cursor = json.dumps({"start_after": result.next_start_after})
    if not run_requests:
        context.update_cursor(new_cursor)
        return dg.SkipReason(f"no new object versions ({result.listed} keys listed from {source.uri})")
    return dg.SensorResult(
        run_requests=run_requests,
        cursor=new_cursor,
        dynamic_partitions_requests=[batches.build_add_request(partitions)] if partitions else None,
    )
