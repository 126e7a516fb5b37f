"""The labelling pipeline's Dagster definitions: `<name>/ticket_labels` (the model labels the landed tickets),
`<name>/published_labels` (the approved labels, written to the output), the job, the landing sensor and the
schedule that start it.

`ticket_labels` sets its data version to the label set's digest, so the approval gate binds a request to exactly
these labels; `published_labels` calls the gate's `require_approval` first and publishes the label set the approved
request names, never a newer one. The gate itself (`runtime_ops.components.ApprovalGate`) is declared beside the
pipeline (`defs/tickets_gate/defs.yaml`); its `require_approval` is handed in by the component, since a domain
does not import another.
"""

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from runtime_ops.inference.completion import Classifier, Labelling
from runtime_ops.inference.costs import Prices
from runtime_ops.inference.spec import PUBLISHED_KEY, InferenceSpec, label_set_key
from runtime_ops.inference.summary import evidence, label_set_digest
from runtime_ops.inference.tickets import Refused, Ticket, dedupe, is_ticket_key, parse_ticket_file
from runtime_ops.landing import LandingSource, ObjectRef, is_ignored_key, open_landing
from runtime_ops.observability.steps import RUN_LOGGER_CONFIG
from runtime_ops.resources.inference import InferenceEndpointResource
from runtime_ops.resources.landing import LandingResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import GATED_RUN_TAGS, io_retry
from runtime_ops.tags import PIPELINE_TAG

log = logging.getLogger(__name__)

# (context, target asset key) -> the approved request; raises dg.Failure otherwise (approvals/asset_gate.py).
RequireApproval = Callable[[dg.AssetExecutionContext, dg.AssetKey], dict[str, Any]]
MAX_REFUSED_SHOWN = 20


def landed_tickets(source: LandingSource, labels: Sequence[str]) -> tuple[list[Ticket], list[Refused], list[ObjectRef]]:
    """Every ticket in the landing (files in key order; an id keeps its first occurrence), the lines refused, and
    the ticket files read."""
    refs = [r for page in source.iter_pages() for r in page if is_ticket_key(r.key) and not is_ignored_key(r.key)]
    tickets: list[Ticket] = []
    refused: list[Refused] = []
    for ref in refs:
        found, bad = parse_ticket_file(ref.key, source.read(ref), labels)
        tickets += found
        refused += bad
    kept, repeated = dedupe(tickets)
    return kept, refused + repeated, refs


def classifier_for(spec: InferenceSpec, endpoint: InferenceEndpointResource) -> tuple[Classifier, Prices]:
    """The endpoint's model when RUNTIME_OPS_INFERENCE_URL is set, else the local stand-in (which costs nothing)."""
    if endpoint.url:
        from runtime_ops.inference.client import ChatClassifier

        model = ChatClassifier(endpoint.url, model=spec.model, api_key=endpoint.api_key, timeout_s=spec.timeout_s)
        return model, spec.prices
    from runtime_ops.inference.stand_in import LocalKeywordClassifier

    return LocalKeywordClassifier(spec.labels), Prices()


def label_set_lines(tickets: Sequence[Ticket], labelling: Labelling) -> bytes:
    by_id = {t.id: t for t in tickets}
    rows = [
        {"id": i.item_id, "label": i.label, "model": labelling.model, "reviewed_label": by_id[i.item_id].label}
        for i in labelling.items
    ]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _metadata(found: dict[str, Any], digest: str, refused: Sequence[Refused]) -> dict[str, Any]:
    metadata: dict[str, Any] = {k: v for k, v in found.items() if v is not None}
    if found["accuracy"] is None:  # nothing labelled to measure: shown as missing, and a gate rule reading it waits
        metadata["accuracy"] = dg.MetadataValue.null()
    metadata["cost_usd"] = dg.MetadataValue.float(float(found["cost_usd"]))
    metadata["run_cost_usd"] = dg.MetadataValue.float(float(found["run_cost_usd"]))
    metadata["label_set"] = label_set_key(digest)
    metadata["refused"] = len(refused)
    if refused:
        shown = "\n".join(f"- `{r.source}`: {r.reason}" for r in refused[:MAX_REFUSED_SHOWN])
        metadata["refused_lines"] = dg.MetadataValue.md(shown)
    return metadata


def build_inference_defs(spec: InferenceSpec, require_approval: RequireApproval) -> dg.Definitions:
    labels_key = dg.AssetKey(list(spec.labels_key))

    @dg.asset(
        key=labels_key,
        group_name=spec.name,
        kinds={"python"},
        retry_policy=io_retry(spec.retry_delay_s),
        description="Every landed ticket labelled by the model (each answer stored once per ticket, text and model).",
    )
    def ticket_labels(
        context: dg.AssetExecutionContext,
        state: StateStoreResource,
        landing: LandingResource,
        inference: InferenceEndpointResource,
    ) -> dg.MaterializeResult:
        from runtime_ops.inference.labelling import label_tickets

        source = open_landing(spec.landing, endpoint_url=landing.endpoint_url)
        tickets, refused, files = landed_tickets(source, spec.labels)
        for problem in refused[:MAX_REFUSED_SHOWN]:
            context.log.warning(f"ticket refused: {problem.source}: {problem.reason}")
        if not tickets:
            raise dg.Failure(
                f"no tickets in {spec.landing} ({len(files)} ticket files, {len(refused)} lines refused); land .jsonl "
                'files with one {"id", "text", "label"?} object a line, or .txt files with one ticket each'
            )
        classifier, prices = classifier_for(spec, inference)
        results = state.store().scoped(spec.name).inference
        labelling = label_tickets(
            tickets,
            labels=spec.labels,
            classifier=classifier,
            prices=prices,
            results=results,
            concurrency=spec.concurrency,
            run_id=context.run_id,
        )
        found = evidence(tickets, labelling)
        digest = label_set_digest(labelling)
        # The label set is kept by its digest, so publishing writes exactly what was approved.
        open_landing(spec.output, endpoint_url=landing.endpoint_url).put(
            label_set_key(digest), label_set_lines(tickets, labelling)
        )
        context.log.info(
            f"{found['items']} tickets labelled by {labelling.model}: {found['items_called']} called, "
            f"{found['items_reused']} reused; accuracy {found['accuracy']} on {found['labelled']} reviewed; "
            f"${found['cost_usd']:.4f}"
        )
        return dg.MaterializeResult(metadata=_metadata(found, digest, refused), data_version=dg.DataVersion(digest))

    @dg.asset(
        key=dg.AssetKey(list(spec.published_key)),
        group_name=spec.name,
        kinds={"python"},
        deps=[ticket_labels],
        description="The approved label set, written to the output (refuses unless the gate approved the latest one).",
    )
    def published_labels(context: dg.AssetExecutionContext, landing: LandingResource) -> dg.MaterializeResult:
        # The gate binds its request to the latest materialization of ticket_labels; that materialization names its
        # label set. Read it before and after the gate's verdict: a newer one in between needs its own approval.
        seen = _latest_label_set(context, labels_key)
        request = require_approval(context, labels_key)
        if _latest_label_set(context, labels_key) != seen:
            raise dg.Failure(
                f"refusing: {labels_key.to_user_string()} was materialized again while publishing; its new label set "
                "needs its own approval"
            )
        label_set = seen[1]
        output = open_landing(spec.output, endpoint_url=landing.endpoint_url)
        data = _read_key(output, label_set)
        output.put(PUBLISHED_KEY, data)
        lines = data.count(b"\n")
        context.log.info(f"published {lines} labels of {label_set} (approval {request['id']})")
        return dg.MaterializeResult(
            metadata={
                "items": lines,
                "label_set": label_set,
                "published": PUBLISHED_KEY,
                "approval": str(request["id"]),
            },
            data_version=dg.DataVersion(label_set.rsplit("/", 1)[-1].removesuffix(".jsonl")),
        )

    tags = {**GATED_RUN_TAGS, PIPELINE_TAG: spec.name, "dagster/max_runtime": "3600"}
    job = dg.define_asset_job(
        spec.qualified("label_job"),
        selection=dg.AssetSelection.assets(ticket_labels),
        tags=tags,
        config=RUN_LOGGER_CONFIG,
        description="Label the landed tickets; the approval gate then decides whether they are published.",
    )
    schedules = []
    if spec.schedule:
        schedules.append(
            dg.ScheduleDefinition(
                name=spec.qualified("label_schedule"),
                cron_schedule=spec.schedule,
                execution_timezone="UTC",
                job=job,
                default_status=dg.DefaultScheduleStatus.RUNNING,
            )
        )
    return dg.Definitions(
        assets=[ticket_labels, published_labels],
        jobs=[job],
        sensors=[build_tickets_sensor(spec, job)],
        schedules=schedules,
    )


def _latest_label_set(context: dg.AssetExecutionContext, key: dg.AssetKey) -> tuple[str, str]:
    """(run id, label set key) of the latest materialization of `key`."""
    event = context.instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event is not None else None
    if event is None or materialization is None or "label_set" not in materialization.metadata:
        raise dg.Failure(f"refusing: {key.to_user_string()} has no label set to publish; materialize it first")
    return event.run_id, str(materialization.metadata["label_set"].value)


def _read_key(source: LandingSource, key: str) -> bytes:
    # Listing from just before the key finds it on the first page (keys are listed in order).
    for ref in next(source.iter_pages(start_after=key[:-1], page_size=50), []):
        if ref.key == key:
            return source.read(ref)
    raise dg.Failure(f"the approved label set {key} is not in the output; label the tickets again and approve that")


def landing_state(source: LandingSource) -> str:
    """A digest of the ticket files' keys and versions: it changes when a file lands, changes or goes."""
    digest = hashlib.sha256()
    for page in source.iter_pages():
        for ref in page:
            if is_ticket_key(ref.key) and not is_ignored_key(ref.key):
                digest.update(f"{ref.key}\0{ref.version}\n".encode())
    return digest.hexdigest()


def build_tickets_sensor(spec: InferenceSpec, job: Any) -> dg.SensorDefinition:
    @dg.sensor(
        name=spec.qualified("landing_sensor"),
        job=job,
        minimum_interval_seconds=spec.sensor_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Starts {spec.qualified('label_job')} when ticket files land, change or go in {spec.landing}.",
    )
    def tickets_sensor(context: dg.SensorEvaluationContext, landing: LandingResource) -> dg.SensorResult:
        source = open_landing(spec.landing, endpoint_url=landing.endpoint_url)
        state = landing_state(source)
        if state == context.cursor:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"no ticket file changed in {spec.landing}"))
        if state == hashlib.sha256().hexdigest():  # an empty landing: nothing to label
            return dg.SensorResult(skip_reason=dg.SkipReason(f"no ticket files in {spec.landing}"), cursor=state)
        # The run key is the landing's state: a tick evaluated twice launches one run.
        return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"tickets:{state[:24]}")], cursor=state)

    return tickets_sensor
