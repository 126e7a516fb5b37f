"""The approvals sensors: a recorded decision (a person's, or the online half of the gate's: `approvals/online_gate.py`)
becomes a check result and one run. `decisions_tick` is what every gate's sensor does on a tick; the retrieval
pipeline's sensor (`approvals_tick`) launches the promotion (after its ramp, when the pipeline declares one:
`approvals/ramp.py`), an asset gate's (`approvals/asset_gate.py`) its `on_approval`."""

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from runtime_ops import clock
from runtime_ops.approvals.anchors import anchor_heads, settings_sink
from runtime_ops.approvals.announce import SENSOR_INTERVAL_S, announcer_for
from runtime_ops.approvals.gate import outcome_for
from runtime_ops.approvals.lifecycle_gate import SENSOR_ACTOR, facts_for, ready_to_promote
from runtime_ops.approvals.online_gate import review_pending
from runtime_ops.approvals.ramp import advance_ramp, ramp_text, stage_evidence
from runtime_ops.jobs import AssetJob
from runtime_ops.lifecycle.machine import APPROVED, PROMOTING, RAMPING, ramp_required
from runtime_ops.observability.logs import log_format
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.approvals import ApprovalsResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import GATED_RUN_TAGS
from runtime_ops.runs import run_tagged
from runtime_ops.store import StateStore
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.approvals.lifecycle import position_of
from runtime_ops.tags import APPROVAL_TAG, APPROVAL_TRACE_TAG

console = logging.getLogger("runtime_ops.approvals")


def latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None
) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The materialization a runless check result judges: without it, Dagster does not tie the result to it."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition is not None else None), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )


def build_approvals_sensor(spec: PipelineSpec, promotion_job: AssetJob) -> dg.SensorDefinition:
    @dg.sensor(
        name=spec.qualified("approvals_sensor"),
        jobs=[promotion_job],
        minimum_interval_seconds=spec.sensor_interval(SENSOR_INTERVAL_S),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Announces approval requests (Slack or signed links in the log), escalates and expires them "
        "on their deadlines (running compensations once), keeps Slack messages up to date, and turns each approved "
        "request into a passed human_approval result and one promotion run (run key = approval id).",
    )
    def approvals_sensor(
        context: dg.SensorEvaluationContext, state: StateStoreResource, approvals: ApprovalsResource
    ) -> dg.SensorResult | dg.SkipReason:
        store = state.store().scoped(spec.name)
        announcer = announcer_for(approvals, store, spec.approvals.slack_channel, spec.gate.online, spec.rollout)
        return approvals_tick(context, store, announcer, spec)

    return approvals_sensor


def _anchor(context: dg.SensorEvaluationContext, audit_log: Audit) -> None:
    """Copy the audit chains' heads that moved to the anchors; a sink that is down delays anchoring (the next
    tick catches up), never the decisions."""
    try:
        sink = settings_sink()
        anchor = anchor_heads(audit_log, sink)
    except Exception as exc:
        context.log.warning(f"could not anchor the audit heads ({type(exc).__name__}: {exc}); retrying next tick")
        return
    if anchor is not None:
        context.log.info(f"anchored the audit heads of {len(anchor.heads)} chains in {sink.where}")


def _ramp_passed(
    context: dg.SensorEvaluationContext, store: StateStore, announcer: Any, spec: PipelineSpec, request: dict[str, Any]
) -> bool:
    """One tick of an approved request's ramp (`approvals/ramp.py`): True when its promotion launches now. What
    changed is shown at once (the message brought up to date); a roll back is also said in a thread reply (or a log
    line), once, through the effects ledger: a Slack outage delays it to a later tick, never loses it."""
    now = clock.now()
    move = advance_ramp(store, spec.rollout, request, stage_evidence(store, spec.rollout, spec.gate.online), now)
    if move.message:
        context.log.info(move.message)
    if move.message or move.rolled_back:
        current = store.requests.get_request(request["id"]) or request
        try:
            if move.message:
                announcer.sync_message(current)
            if move.rolled_back:
                text = ramp_text(current, store.rollouts.stages(request["id"]))
                announcer.note(current, f"ramp_rolled_back:{request['id']}", text, now)
        except Exception as exc:  # Slack down: the decision stands; the next tick says it
            context.log.warning(f"could not announce the ramp of {request['id']} ({type(exc).__name__}: {exc})")
    return move.promote


def decisions_tick(
    context: dg.SensorEvaluationContext,
    store: StateStore,
    announcer: Any,
    *,
    passed: Callable[[dict[str, Any]], dg.AssetCheckEvaluation | None],
    launch: Callable[[dict[str, Any]], dg.RunRequest | None],
    review: Callable[[Callable[[str], None]], dict[str, list[str]]] | None = None,
    kinds: tuple[str, ...] = ("human",),
    also: Callable[[], list[dict[str, Any]]] | None = None,
) -> dg.SensorResult | dg.SkipReason:
    """One tick of any gate's sensor (the retrieval pipeline's, an `ApprovalGate`'s): announce, escalate, expire and
    compensate, resync Slack, anchor the audit heads, then turn each approved request not yet launched into its
    passed check result (`passed`, once) and ONE run (`launch`; None: not yet, e.g. a ramp still running). `review`
    runs first (the retrieval gate's online half), so a request it decides is announced by the same tick. `kinds`:
    which approvals launch a run (an asset gate's `policy` approvals too); `also`: more approved requests to launch
    (the retrieval pipeline's policy approvals that its ramp holds)."""

    def emit(message: str) -> None:
        # Log lines never carry a link's token (logs redact it: a link decides for its approver). Without Slack,
        # a developer's terminal (RUNTIME_OPS_LOG_FORMAT=console, as `make dev` sets) still gets the usable
        # links, printed instead of logged, so the gate works out of the box; JSON (production) logs do not.
        # The sensor's own log (the UI's) keeps every announcement; `make dev`'s console leaves out Dagster's
        # redacted echo of it (runtime_ops.cli.dev.shown), so a link shows there once.
        context.log.warning(message)
        if log_format() == "console":
            print(f"[runtime_ops] {message}", file=sys.stderr, flush=True)
        else:
            console.warning(message)

    announcer.emit = emit
    reviewed = review(context.log.info) if review is not None else {}
    changes = {**reviewed, **announcer.tick(clock.now())}
    for kind, ids in changes.items():
        if ids:
            context.log.info(f"{kind}: {', '.join(ids)}")
    _anchor(context, store.audit_log)
    cursor = json.loads(context.cursor) if context.cursor else {"reported": []}
    reported: list[str] = cursor["reported"]
    requests: list[dg.RunRequest] = []
    events: list[dg.AssetCheckEvaluation] = []
    for request in [*store.notifications.approved_unlaunched(kinds), *(also() if also is not None else [])]:
        run = run_tagged(context.instance, APPROVAL_TAG, request["id"])
        if run is not None:
            store.notifications.mark_request_launched(request["id"], run.run_id)
            continue
        if request["id"] not in reported and request["kind"] in kinds:
            event = passed(request)
            if event is not None:
                events.append(event)
            reported.append(request["id"])
        run_request = launch(request)
        if run_request is not None:
            requests.append(run_request)
    if not requests and not events:
        done = ", ".join(f"{k} {len(v)}" for k, v in changes.items() if v)
        return dg.SkipReason(f"no new decisions{'; ' + done if done else ''}")
    return dg.SensorResult(run_requests=requests, asset_events=events, cursor=json.dumps({"reported": reported[-200:]}))


def approvals_tick(
    context: dg.SensorEvaluationContext, store: StateStore, announcer: Any, spec: PipelineSpec
) -> dg.SensorResult | dg.SkipReason:
    """The retrieval pipeline's tick: its online half first, a passed human_approval on the evaluation report, and
    the promotion run after the ramp (when the pipeline declares one)."""
    report_key = dg.AssetKey(spec.asset_path("evaluation_report"))

    def passed(request: dict[str, Any]) -> dg.AssetCheckEvaluation:
        outcome = outcome_for(request, store.evaluations.get_eval_report(request["eval_report_id"]))
        return dg.AssetCheckEvaluation(
            asset_key=report_key,
            check_name="human_approval",
            passed=True,
            blocking=True,
            description=outcome.message,
            metadata={"approval_id": request["id"], "decided_by": request["decided_by"] or ""},
            target_materialization_data=latest_materialization(context.instance, report_key),
        )

    def launch(request: dict[str, Any]) -> dg.RunRequest | None:
        row = store.lifecycle.get(request["id"])
        if row is not None:
            if not _launches(context, store, announcer, spec, request, row):
                return None
        elif spec.rollout.ramps and not _ramp_passed(context, store, announcer, spec, request):
            return None
        return dg.RunRequest(
            run_key=request["id"],
            job_name=spec.qualified("promotion_job"),
            tags={
                **spec.lifecycle_tags,
                APPROVAL_TAG: request["id"],
                **GATED_RUN_TAGS,
                # The promotion's step spans link to the span that opened the request (see observe_step).
                **({APPROVAL_TRACE_TAG: request["trace_context"]} if request.get("trace_context") else {}),
            },
            run_config={"ops": {spec.qualified("production_model"): {"config": {"approval_id": request["id"]}}}},
        )

    def review(log: Callable[[str], None]) -> dict[str, list[str]]:
        # Online first: a request it decides is compensated, and its Slack message updated, by the same tick.
        return review_pending(store, spec.gate.online, clock.now(), emit=log)

    def ramped_by_policy() -> list[dict[str, Any]]:
        return [r for r in held_policy_approvals(store, spec) if r["promotion_run_id"] is None]

    return decisions_tick(context, store, announcer, passed=passed, launch=launch, review=review, also=ramped_by_policy)


def held_policy_approvals(store: StateStore, spec: PipelineSpec) -> list[dict[str, Any]]:
    """Candidates the policy approved that wait for the ramp (or passed it): the training run does not launch them."""
    if not spec.rollout.ramps:
        return []
    found: list[dict[str, Any]] = []
    for row in store.lifecycle.in_states((APPROVED, RAMPING, PROMOTING)):
        request = store.requests.get_request(row["approval_id"])
        if request is None or request["kind"] != "policy":
            continue
        if row["state"] == APPROVED and not ramp_required(position_of(row), facts_for(store, spec.rollout, request)):
            continue  # the training run launches it
        if row["state"] == PROMOTING and not store.rollouts.stages(request["id"]):
            continue
        found.append(request)
    return found


def _launches(
    context: dg.SensorEvaluationContext,
    store: StateStore,
    announcer: Any,
    spec: PipelineSpec,
    request: dict[str, Any],
    row: dict[str, Any],
) -> bool:
    """Whether the promotion run of `request` launches on this tick, as its lifecycle says: a promoting candidate
    does; an approved one after its ramp (when one is required), or at once (moved to promoting here); anything
    else (ramping on, halted, rolled back, superseded) does not."""
    state = row["state"]
    if state == PROMOTING:
        return True
    if state == APPROVED and not ramp_required(position_of(row), facts_for(store, spec.rollout, request)):
        refusal = ready_to_promote(store, spec.rollout, request, actor=SENSOR_ACTOR, by_training_run=False)
        if refusal is not None:
            context.log.warning(f"{request['id']}: {refusal}")
        return refusal is None
    if state in (APPROVED, RAMPING):
        return _ramp_passed(context, store, announcer, spec, request)
    return False
