"""The alert sensor: each new firing alert in the inbox is matched against the rules and remediated once.

All state lives in the inbox rows, so a restart or a tick that died half-way loses nothing: an alert's action is
recorded (compare-and-set) before its run is requested, the run key is the alert's (fingerprint, startsAt), and
the next tick finds the run by its tag and records its id (or requests it again: same key, launched once).
"""

import logging
from datetime import datetime
from typing import Any

import dagster as dg

from runtime_ops import clock
from runtime_ops.alerts.rules import RuleFileError, load_rules
from runtime_ops.alerts.webhook import alert_key
from runtime_ops.approvals.requests import request_policy
from runtime_ops.approvals.rollback_facts import BEFORE_WINDOW, EVIDENCE_KEY, NOW_WINDOW, HelpfulShare, RollbackFacts
from runtime_ops.models.sensors import active_lifecycle_run
from runtime_ops.observability.steps import RUN_LOGGER_CONFIG
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import GATED_RUN_TAGS
from runtime_ops.runs import run_tagged
from runtime_ops.settings import SettingsError
from runtime_ops.tags import (
    ALERT_FINGERPRINT_TAG,
    ALERT_RULE_TAG,
    ALERT_TAG,
    ALERTNAME_TAG,
    RETRAIN_TRIGGER_TAG,
    ROLLBACK_APPROVAL_TAG,
)

JOB_FOR_ACTION = {"retrain": "train_job", "reembed": "reembed_job", "rollback": "rollback_job"}
_DONE = {
    dg.DagsterRunStatus.SUCCESS: "succeeded",
    dg.DagsterRunStatus.FAILURE: "failed",
    dg.DagsterRunStatus.CANCELED: "failed",
}

console = logging.getLogger("runtime_ops.alerts")


def check_rule_file(spec: PipelineSpec) -> None:
    """A broken rule file fails the code location at load, naming the pipeline, the file and the line."""
    try:
        load_rules(str(spec.alert_rules))
    except RuleFileError as exc:
        raise SettingsError(
            f"pipeline {spec.name}: alert_rules (RUNTIME_OPS_ALERT_RULES): invalid rule file:\n  {exc}"
        ) from None


def run_request(alert: dict[str, Any], spec: PipelineSpec) -> dg.RunRequest:
    """The remediation run of an alert whose action is recorded (rebuilt the same way on every tick)."""
    action = alert["action"]
    params = alert.get("action_params") or {}
    tags = {
        **spec.lifecycle_tags,
        ALERT_TAG: alert["run_key"],
        ALERTNAME_TAG: (alert["alertname"] or "-")[:200],
        ALERT_FINGERPRINT_TAG: alert["fingerprint"],
        ALERT_RULE_TAG: alert["rule"] or "-",
    }
    ident = {"alert_id": alert["id"], "alert_key": alert["run_key"]}
    if action == "retrain":
        tags[RETRAIN_TRIGGER_TAG] = "alert"
        return dg.RunRequest(
            job_name=spec.qualified("train_job"), run_key=alert["run_key"], tags={**GATED_RUN_TAGS, **tags}
        )
    if action == "reembed":
        config = {**ident, "batch_id": params.get("batch_id")}
        return dg.RunRequest(
            job_name=spec.qualified("reembed_job"),
            run_key=alert["run_key"],
            tags=tags,
            run_config={"ops": {spec.qualified("reembed_embeddings"): {"config": config}}, **RUN_LOGGER_CONFIG},
        )
    if action == "rollback":
        if alert.get("approval_id"):
            tags[ROLLBACK_APPROVAL_TAG] = alert["approval_id"]
        config = {
            **ident,
            "from_version": params["from_version"],
            "to_version": params["to_version"],
            "approval_id": alert.get("approval_id"),
        }
        return dg.RunRequest(
            job_name=spec.qualified("rollback_job"),
            run_key=alert["run_key"],
            tags={**GATED_RUN_TAGS, **tags},
            run_config={"ops": {spec.qualified("rollback_production"): {"config": config}}, **RUN_LOGGER_CONFIG},
        )
    raise ValueError(f"alert #{alert['id']}: action {action!r} launches no run")


def _run_for(instance: dg.DagsterInstance, key: str) -> dg.DagsterRun | None:
    return run_tagged(instance, ALERT_TAG, key)


class _Tick:
    def __init__(self, context: dg.SensorEvaluationContext, store: Any, spec: PipelineSpec) -> None:
        self.context, self.store, self.spec = context, store, spec
        self.requests: list[dg.RunRequest] = []
        self.done: list[str] = []

    def say(self, message: str, *, warn: bool = False) -> None:
        self.done.append(message)
        (self.context.log.warning if warn else self.context.log.info)(message)
        if warn:
            console.warning(message)

    def finish(self, alert: dict[str, Any], status: str, detail: str, now: datetime, **values: Any) -> bool:
        ok = self.store.alerts.set_alert_action(
            alert["id"], expect=None, action_status=status, action_detail=detail, handled_at=now, **values
        )
        if ok:  # notify-only and unhandled alerts go to the console too: nobody else will act on them
            message = f"alert #{alert['id']} {alert['alertname']} ({alert['fingerprint']}): {status}: {detail}"
            self.say(message, warn=status in ("notified", "no_rule", "error"))
        return ok

    def request(self, alert: dict[str, Any], expect: str | None, **values: Any) -> None:
        """Record the run as requested (compare-and-set), then request it."""
        if self.store.alerts.set_alert_action(alert["id"], expect=expect, action_status="requested", **values):
            row = self.store.alerts.get_alert(alert["id"])
            self.requests.append(run_request(row, self.spec))
            self.say(f"alert #{alert['id']} {alert['alertname']}: {row['action']} requested (run key {row['run_key']})")

    # ---------------------------------------------------------------- runs already on their way
    def reconcile(self) -> None:
        instance = self.context.instance
        for alert in self.store.alerts.alerts_in_action("requested"):
            run = _run_for(instance, alert["run_key"])
            if run is None:  # the tick that requested it never reached the daemon: same key, launched once
                self.requests.append(run_request(alert, self.spec))
                continue
            self.store.alerts.set_alert_action(
                alert["id"], expect="requested", action_status="launched", run_id=run.run_id
            )
            if alert.get("approval_id"):
                self.store.notifications.mark_request_launched(alert["approval_id"], run.run_id)
            self.say(f"alert #{alert['id']}: run {run.run_id} launched")
        for alert in self.store.alerts.alerts_in_action("launched"):
            run = instance.get_run_by_id(alert["run_id"]) if alert["run_id"] else None
            outcome = _DONE.get(run.status) if run is not None else "failed"
            if outcome is None:
                continue
            detail = f"run {alert['run_id']} {run.status.value if run else 'is gone from the instance'}"
            self.store.alerts.set_alert_action(
                alert["id"], expect="launched", action_status=outcome, action_detail=detail
            )
            self.say(f"alert #{alert['id']}: remediation {outcome} ({detail})", warn=outcome == "failed")
        for alert in self.store.alerts.alerts_in_action("awaiting_approval"):
            request = self.store.requests.get_request(alert["approval_id"])
            status = request["status"] if request else "missing"
            if status == "approved":
                detail = f"rollback approved by {request['decided_by']} ({request['id']})"  # type: ignore[index]
                self.request(alert, "awaiting_approval", action_detail=detail)
            elif status != "pending":
                reason = (request or {}).get("decision_reason") or ""
                detail = f"rollback {status} ({alert['approval_id']}){': ' + reason if reason else ''}"
                self.store.alerts.set_alert_action(
                    alert["id"], expect="awaiting_approval", action_status="rejected", action_detail=detail
                )
                self.say(f"alert #{alert['id']}: {detail}")

    # ---------------------------------------------------------------- new alerts
    def handle(self, alert: dict[str, Any], rules: Any, now: datetime) -> None:
        if alert["status"] != "firing":
            self.finish(alert, "skipped", "resolved before the alert sensor saw it firing", now)
            return
        summary = (alert.get("annotations") or {}).get("summary", "")
        rule = rules.match(alert["labels"] or {})
        if rule is None:
            self.finish(alert, "no_rule", f"no rule matches its labels; recorded only. {summary}".strip(), now)
            return
        base = {"rule": rule.name, "action": rule.action}
        if rule.action == "notify":
            self.finish(alert, "notified", f"rule {rule.name}: notify only. {summary}".strip(), now, **base)
            return
        busy = self.store.alerts.active_remediation(fingerprint=alert["fingerprint"], exclude_id=alert["id"])
        if busy is None and rule.action == "rollback":
            busy = self.store.alerts.active_remediation(action="rollback", exclude_id=alert["id"])
        if busy is not None:
            what = f"alert #{busy['id']} ({busy['action']} {busy['action_status']}"
            what += f", run {busy['run_id']})" if busy.get("run_id") else ")"
            self.finish(alert, "suppressed", f"suppressed: remediation in progress: {what}", now, **base)
            return
        if rule.cooldown:
            last = self.store.alerts.last_rule_launch(rule.name)
            if last is not None and now - last < rule.cooldown:
                detail = f"suppressed: rule {rule.name} is cooling down ({rule.cooldown} since {last:%H:%M:%S} UTC)"
                self.finish(alert, "suppressed", detail, now, **base)
                return

        key = alert_key(alert["fingerprint"], alert["starts_at"])
        values: dict[str, Any] = {**base, "run_key": key, "handled_at": now}
        if rule.action == "retrain":
            if not self.spec.retrain.on_alert:
                detail = f"rule {rule.name}: retrains on alerts are off for this pipeline (retrain.on_alert: false)"
                self.finish(alert, "suppressed", detail, now, **base)
                return
            running = active_lifecycle_run(self.context.instance, self.spec.name)
            if running:  # one lifecycle run at a time: retrain when the current one ends (decided next tick)
                self.store.alerts.set_alert_action(alert["id"], expect=None, action_detail=f"waiting for run {running}")
                return
            self.request(alert, None, action_detail=f"rule {rule.name}: retrain", **values)
        elif rule.action == "reembed":
            batch = None
            if rule.batch_label:
                batch = (alert["labels"] or {}).get(rule.batch_label)
                if not batch:
                    detail = f"rule {rule.name} re-embeds the batch named by label {rule.batch_label!r}; it has none"
                    self.finish(alert, "error", detail, now, **base)
                    return
                if self.store.ledger.get_batch(batch) is None:
                    detail = f"landing batch {batch!r} (label {rule.batch_label}) is unknown"
                    self.finish(alert, "error", detail, now, **base)
                    return
            scope = f"landing batch {batch}" if batch else "everything"
            self.request(alert, None, action_params={"batch_id": batch}, action_detail=f"re-embed {scope}", **values)
        elif rule.action == "rollback":
            self._rollback(alert, rule, values, now)

    def _rollback(self, alert: dict[str, Any], rule: Any, values: dict[str, Any], now: datetime) -> None:
        # numpy: kept out of the code location's load
        from runtime_ops.alerts.rollback import RollbackRefused, plan_rollback

        try:
            current, target = plan_rollback(self.store.registry)
        except RollbackRefused as exc:
            self.finish(alert, "error", str(exc), now, rule=rule.name, action=rule.action)
            return
        params = {"from_version": current, "to_version": target}
        if rule.preapproved:
            detail = f"roll production back v{current} -> v{target} (pre-approved by rule {rule.name})"
            self.request(alert, None, action_params=params, action_detail=detail, **values)
            return
        report = (
            self.store.evaluations.latest_eval_report(candidate_version=target)
            or self.store.evaluations.latest_eval_report()
        )
        if report is None:
            detail = "no evaluation report to attach to the approval request"
            self.finish(alert, "error", detail, now, rule=rule.name, action=rule.action)
            return
        request, _ = self.store.alerts.open_rollback_request(
            alert={**alert, "run_key": values["run_key"], "rule": rule.name},
            from_version=current,
            to_version=target,
            eval_report_id=report["id"],
            policy=request_policy(self.spec),
            now=now,
            evidence={EVIDENCE_KEY: self._facts(alert, rule.name, current, target, now).to_json()},
        )
        detail = f"roll production back v{current} -> v{target}: waiting for approval request {request['id']}"
        if self.store.alerts.set_alert_action(
            alert["id"],
            expect=None,
            action_status="awaiting_approval",
            approval_id=request["id"],
            action_params=params,
            action_detail=detail,
            **values,
        ):
            self.say(f"alert #{alert['id']} {alert['alertname']}: {detail}", warn=True)

    def _facts(self, alert: dict[str, Any], rule: str, current: int, target: int, now: datetime) -> RollbackFacts:
        """What the rollback's request shows: the alert, and production's helpful share in the last 30 minutes
        against the day before (the windows of the shipped quality rule), read from the query log's feedback."""
        split = now - NOW_WINDOW
        return RollbackFacts(
            pipeline=self.spec.name,
            alertname=alert["alertname"] or alert["fingerprint"],
            alert_id=int(alert["id"]),
            rule=rule,
            summary=str((alert.get("annotations") or {}).get("summary") or ""),
            fired_at=alert["starts_at"],
            from_version=current,
            to_version=target,
            now=HelpfulShare(*self.store.query_log.judgements(split, now)),
            before=HelpfulShare(*self.store.query_log.judgements(split - BEFORE_WINDOW, split)),
            measured_at=now,
        )


def build_alert_sensor(spec: PipelineSpec, jobs: list[Any]) -> dg.SensorDefinition:
    check_rule_file(spec)

    @dg.sensor(
        name=spec.qualified("alert_sensor"),
        jobs=jobs,
        minimum_interval_seconds=spec.sensor_interval(15),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Takes each new firing alert of this pipeline in the inbox (POST /alerts/alertmanager; label "
        "`pipeline`, else the default pipeline) to the first matching remediation rule and launches its run once "
        "(run key = fingerprint + startsAt): retrain, re-embed, or a rollback (through an approval request unless "
        "pre-approved). A fingerprint whose remediation is under way launches nothing more.",
    )
    def alert_sensor(context: dg.SensorEvaluationContext, state: StateStoreResource) -> dg.SensorResult | dg.SkipReason:
        store = state.store().scoped(spec.name)
        rules = load_rules(str(spec.alert_rules))  # read every tick: edits apply without a reload
        tick = _Tick(context, store, spec)
        tick.reconcile()
        now = clock.now()
        for alert in store.alerts.alerts_to_handle():
            tick.handle(alert, rules, now)
        if not tick.requests:
            return dg.SkipReason("; ".join(tick.done[-5:]) if tick.done else "no new alerts")
        return dg.SensorResult(run_requests=tick.requests)

    return alert_sensor
