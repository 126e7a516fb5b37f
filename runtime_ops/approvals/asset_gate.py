"""An approval gate on any Dagster asset (`ApprovalGate`): its Dagster side.

- a blocking check `approval` on the target: each materialization (each partition's, for a partitioned target)
  opens one request bound to its digest (`policies/digests.py:materialization_digest`) through the one gate
  (`approvals/gate.py`); pending is a WARN (the run succeeds), approved passes, rejected/expired is an ERROR;
- a sensor `<gate>__approval_sensor` doing what every gate's sensor does (`approvals/sensors.py:decisions_tick`:
  announce, escalate, expire, resync Slack) and turning each approved request into ONE run of `on_approval`
  (run key = request id) and the passed check result;
- `require_approval`, which a downstream asset calls: it refuses unless the target's LATEST materialization has an
  approved request, so an approval of older data never publishes newer data, even when the check was skipped.

The gate's resources sit under keys of its own (`<gate>__gate_state`, `<gate>__gate_approvals`) with values from
the settings, so a project that defines no runtime_ops resources works, and gates merge beside each other and
beside a `RetrievalPipeline`.
"""

import math
from dataclasses import dataclass
from typing import Any

import dagster as dg

from runtime_ops import clock
from runtime_ops.approvals.announce import SENSOR_INTERVAL_S, announcer_for
from runtime_ops.approvals.gate import SYSTEM, GateSubject, decide_command, open_gate, outcome_for
from runtime_ops.approvals.sensors import decisions_tick, latest_materialization
from runtime_ops.jobs import AssetJob
from runtime_ops.pipeline.gate_spec import GateSpec, split_label, target_label
from runtime_ops.pipeline.resolve import approval_policy
from runtime_ops.policies.digests import materialization_digest
from runtime_ops.policies.gate_expression import GateRule, compile_rule
from runtime_ops.resources.approvals import ApprovalsResource
from runtime_ops.resources.configured import configured_url
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import GATED_RUN_TAGS
from runtime_ops.settings import Settings, get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.tags import APPROVAL_TAG, APPROVAL_TRACE_TAG

CHECK_NAME = "approval"
DATA_VERSION_TAG = "dagster/data_version"
PARTITION_TAG = "dagster/partition"
# Who launched a run, as Dagster+ records it. Not authentication (anyone launching a run can write a tag), so it
# only ever takes a decision away: the person it names cannot approve their own materialization (four eyes).
USER_TAG = "dagster/user"


@dataclass(frozen=True)
class Materialization:
    """The latest materialization of a gated target (one partition's, when partitioned)."""

    label: str
    digest: str
    values: dict[str, Any]  # its metadata's plain values
    run_id: str


def resource_keys(spec: GateSpec) -> tuple[str, str]:
    return spec.qualified("gate_state"), spec.qualified("gate_approvals")


def gate_resources(spec: GateSpec, settings: Settings) -> dict[str, dg.ConfigurableResource]:
    state, approvals = resource_keys(spec)
    database_url = configured_url(settings.database_url, "RUNTIME_OPS_DATABASE_URL", settings.resolved_database_url)
    return {
        state: StateStoreResource(database_url=database_url),
        approvals: ApprovalsResource(
            public_url=settings.public_url, dagster_url=settings.dagster_url, slack_api_url=settings.slack_api_url
        ),
    }


def _plain(value: Any) -> Any:
    """A metadata value as approvers (and the JSON column) can hold it: numbers, text, booleans, else its text."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def latest(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> Materialization | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition is not None else None), limit=1
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    event = records[0].asset_materialization
    values = {name: _plain(meta.value) for name, meta in event.metadata.items()}
    label = target_label(tuple(key.path), partition)
    digest = materialization_digest(label, (event.tags or {}).get(DATA_VERSION_TAG), values)
    return Materialization(label, digest, values, records[0].run_id)


def subject(spec: GateSpec, rule: GateRule | None, seen: Materialization) -> GateSubject:
    evidence = {name: seen.values[name] for name in spec.evidence if name in seen.values}
    return GateSubject(
        target=seen.label, digest=seen.digest, evidence=evidence, auto=rule.evaluate(evidence) if rule else None
    )


def build_gate_check(spec: GateSpec) -> dg.AssetChecksDefinition:
    key = dg.AssetKey(list(spec.target))
    rule = compile_rule(spec.auto_approve) if spec.auto_approve else None
    state_key, _ = resource_keys(spec)

    @dg.asset_check(
        asset=key,
        name=CHECK_NAME,
        blocking=True,
        required_resource_keys={state_key},
        description="Passes when a person (or the auto_approve rule) approved this exact materialization; otherwise "
        "opens one approval request for it and reports it pending as a warning, which fails neither the run nor "
        "the assets after it. Fails (an error) only for a rejected or expired request.",
    )
    def approval(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        partition = context.run.tags.get(PARTITION_TAG)
        seen = latest(context.instance, key, partition)
        if seen is None:
            return dg.AssetCheckResult(passed=False, description=f"{target_label(spec.target, partition)} has no "
                                       "materialization to approve")  # fmt: skip
        store: StateStore = getattr(context.resources, state_key).store().scoped(spec.name)
        gated = subject(spec, rule, seen)
        outcome = open_gate(
            store,
            gated,
            requested_by=context.run.tags.get(USER_TAG) or SYSTEM,
            run_id=context.run.run_id,
            policy=approval_policy(spec.approvals),
            now=clock.now(),
        )
        request = outcome.request or {}
        metadata: dict[str, Any] = {"status": outcome.status, "approval_id": request.get("id", ""),
                                    "digest": seen.digest, **gated.evidence}  # fmt: skip
        if gated.auto is not None:
            metadata["auto_approve"] = gated.auto[1]
        if outcome.status == "pending":
            # Waiting for a person is the gate working, not a failure: downstream assets refuse by themselves
            # (`require_approval`), so the run may succeed.
            metadata["decide"] = decide_command(request["id"])
            if request.get("expire_at") is not None:
                metadata["expires_at"] = dg.MetadataValue.timestamp(request["expire_at"])
            context.log.info(outcome.message)
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN, description=f"Pending: {outcome.message}",
                metadata=metadata,
            )  # fmt: skip
        if not outcome.passed:
            context.log.warning(outcome.message)
        return dg.AssetCheckResult(passed=outcome.passed, description=outcome.message, metadata=metadata)

    return approval


def build_gate_sensor(spec: GateSpec, job: AssetJob | None, settings: Settings) -> dg.SensorDefinition:
    key = dg.AssetKey(list(spec.target))
    state_key, approvals_key = resource_keys(spec)
    target_job = spec.on_approval.job or spec.qualified("on_approval")

    @dg.sensor(
        name=spec.qualified("approval_sensor"),
        jobs=[job] if job is not None else None,
        minimum_interval_seconds=settings.sensor_seconds(SENSOR_INTERVAL_S),
        default_status=dg.DefaultSensorStatus.RUNNING,
        required_resource_keys={state_key, approvals_key},
        description=f"Announces the approval requests of {spec.target_label} (Slack or signed links in the log), "
        f"escalates and expires them on their deadlines, keeps Slack messages up to date, and turns each approved "
        f"request into a passed `{CHECK_NAME}` result and one run of {target_job} (run key = approval id).",
    )
    def approval_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        store: StateStore = getattr(context.resources, state_key).store().scoped(spec.name)
        announcer = announcer_for(getattr(context.resources, approvals_key), store, spec.approvals.slack_channel)

        def passed(request: dict[str, Any]) -> dg.AssetCheckEvaluation | None:
            _, partition = split_label(request["target"])
            seen = latest(context.instance, key, partition)
            if request["kind"] == "policy" or seen is None or seen.digest != request["candidate_digest"]:
                # Passed in its own run already, or the target changed since: this decision is not about the
                # latest materialization, which keeps its own check result.
                return None
            return dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=CHECK_NAME,
                passed=True,
                blocking=True,
                description=outcome_for(request).message,
                metadata={"approval_id": request["id"], "decided_by": request["decided_by"] or ""},
                target_materialization_data=latest_materialization(context.instance, key, partition),
            )

        def launch(request: dict[str, Any]) -> dg.RunRequest:
            _, partition = split_label(request["target"])
            return dg.RunRequest(
                run_key=request["id"],
                job_name=target_job,
                partition_key=partition,
                tags={
                    APPROVAL_TAG: request["id"],
                    **GATED_RUN_TAGS,
                    **({APPROVAL_TRACE_TAG: request["trace_context"]} if request.get("trace_context") else {}),
                },
            )

        return decisions_tick(context, store, announcer, passed=passed, launch=launch, kinds=("human", "policy"))

    return approval_sensor


def approval_gate_defs(spec: GateSpec, settings: Settings | None = None) -> dg.Definitions:
    settings = settings or get_settings()
    job = None
    if spec.on_approval.materialize:
        job = dg.define_asset_job(
            spec.qualified("on_approval"),
            selection=dg.AssetSelection.assets(*(dg.AssetKey(list(k)) for k in spec.on_approval.materialize)),
            description=f"What an approved request of {spec.target_label} materializes (once per request).",
        )
    return dg.Definitions(
        asset_checks=[build_gate_check(spec)],
        sensors=[build_gate_sensor(spec, job, settings)],
        jobs=[job] if job is not None else [],
        resources=gate_resources(spec, settings),
    )


def require_approval(
    context: dg.AssetExecutionContext | dg.OpExecutionContext, target: dg.AssetKey, partition: str | None = None
) -> dict[str, Any]:
    """The approved request of `target`'s latest materialization (of `partition`); raises `dg.Failure` otherwise.

    Call it first in an asset that publishes the gated data: it re-checks the decision itself, so a run that skipped
    the check, or an approval of older data, never publishes the latest materialization unapproved."""
    label = target_label(tuple(target.path), partition)
    seen = latest(context.instance, target, partition)
    if seen is None:
        raise dg.Failure(f"refusing: {label} has no materialization to approve; materialize it with its checks")
    settings = get_settings()
    # Unscoped: every gate on the target keeps its requests under its own name.
    store = open_store(settings.resolved_database_url, settings, pipeline=None)
    requests = store.requests.requests_for_target(seen.label, seen.digest)
    approved = [r for r in requests if r["status"] == "approved"]
    if approved:
        context.log.info(outcome_for(approved[-1]).message)
        return approved[-1]
    what = f"{label}'s latest materialization (run {seen.run_id}, digest {seen.digest[:12]}…)"
    if not requests:
        raise dg.Failure(
            f"refusing: {what} has no approval request; run its `{CHECK_NAME}` check (materialize {label} with "
            "its checks) to open one"
        )
    request = requests[-1]
    how = f"; decide with: {decide_command(request['id'])}" if request["status"] == "pending" else ""
    raise dg.Failure(f"refusing: {what} is not approved: request {request['id']} is {request['status']}{how}")
