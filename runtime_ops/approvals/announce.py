"""Announcing requests and keeping their messages true: Slack when configured, signed links in the log otherwise.

Driven by the approvals sensor on every tick, from state in the store, so a restart loses nothing: a request is
announced once (its escalation too), and a message that missed an update is brought up to date. The deadlines that
tick runs first (escalate, expire, compensate) are `approvals/deadlines.py`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from runtime_ops.approvals import links
from runtime_ops.approvals.asset_view import asset_view
from runtime_ops.approvals.deadlines import run_deadlines
from runtime_ops.approvals.evidence_doc import evidence_doc, stage_results
from runtime_ops.approvals.gate import subject_label
from runtime_ops.approvals.lifecycle_gate import lifecycle_text
from runtime_ops.approvals.links import LOCAL_APPROVER
from runtime_ops.approvals.online_gate import request_evidence
from runtime_ops.approvals.ramp import ramp_held, ramp_text
from runtime_ops.approvals.rollback_facts import rollback_facts
from runtime_ops.approvals.slack.blocks import RequestView, request_fields
from runtime_ops.approvals.slack.client import SlackNotifier, slack_client
from runtime_ops.approvals.stage_evidence import StageRule
from runtime_ops.approvals.view_text import evaluated_on, next_step, view_state
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.approvals import reached_tiers, request_tiers
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.policies.gate_text import interval_text
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore
from runtime_ops.store.operations.alerts import ALERT_SENSOR_LAUNCHES
from runtime_ops.tags import APPROVAL_TAG

if TYPE_CHECKING:
    from runtime_ops.resources.approvals import ApprovalsResource
    from runtime_ops.settings import Settings

log = logging.getLogger("runtime_ops.approvals")

DEFAULT_LINK_TTL = timedelta(hours=24)
OWNER = f"{socket.gethostname()}:{os.getpid()}"
NOTIFY_STALE_AFTER = timedelta(minutes=2)
SENSOR_INTERVAL_S = 10  # the approvals sensor's minimum interval, unless RUNTIME_OPS_SENSOR_INTERVAL overrides it


def sensor_interval(settings: Settings) -> int:
    """How often the approvals sensor ticks, resolved as `PipelineSpec.sensor_interval` resolves it for the
    sensor itself: what "within ~N s" promises after a decision, in the API process as in the daemon."""
    return settings.sensor_seconds(SENSOR_INTERVAL_S)


@dataclass
class Announcer:
    store: StateStore
    link_secret: str
    public_url: str
    dagster_url: str
    notifier: SlackNotifier | None = None
    emit: Callable[[str], None] = field(default=log.warning)
    sensor_interval_s: int = SENSOR_INTERVAL_S
    # The online policy of a request's pipeline (`gate.online`): its min_queries is what the evidence shown counts to.
    online_policy: Callable[[str], OnlinePolicy] = field(default=lambda _: OnlinePolicy())
    # What a ramp stage of a pipeline is judged by (`rollout.min_queries`, `rollout.max_loss`, `gate.online` limits).
    stage_rule: Callable[[str], StageRule] = field(default=lambda _: StageRule())

    # -------------------------------------------------------------- Dagster UI links: built here only
    def run_url(self, run_id: str | None) -> str | None:
        return f"{self.dagster_url.rstrip('/')}/runs/{run_id}" if run_id else None

    def asset_url(self, *path: str) -> str:
        return f"{self.dagster_url.rstrip('/')}/assets/{'/'.join(path)}"

    def promotion_runs_url(self, request: dict[str, Any]) -> str:
        """Where to watch the run an approval of `request` starts."""
        launched = request.get("promotion_run_id")
        if launched == ALERT_SENSOR_LAUNCHES:  # the alert sensor's rollback run, tagged by that sensor
            return f"{self.dagster_url.rstrip('/')}/runs"
        if launched:
            return f"{self.dagster_url.rstrip('/')}/runs/{launched}"
        # Not launched yet: the runs list filtered by the tag the approvals sensor puts on the promotion run (the
        # UI's `q[]=tag:KEY=VALUE`), so the link shows the run once it exists, however many ticks that takes.
        query = urlencode({"q[]": f"tag:{APPROVAL_TAG}={request['id']}"})
        return f"{self.dagster_url.rstrip('/')}/runs?{query}"

    # -------------------------------------------------------------- views
    def view(self, request: dict[str, Any]) -> RequestView:
        """What the Slack message and the approval page show of `request`."""
        if request.get("target") is not None:
            return asset_view(self, request)
        report = self.store.evaluations.get_eval_report(request["eval_report_id"]) or {}
        cand = report.get("candidate_metrics") or {}
        prod = report.get("production_metrics") or {}
        votes = self.store.votes.for_request(request["id"])
        approvals = [v["actor"] for v in votes if v["vote"] == "approve"]
        pipeline = request.get("pipeline") or "demo"
        question_set, questions = evaluated_on(report)
        stages = self.store.rollouts.stages(request["id"])
        ramp = ramp_text(request, stages)
        facts = rollback_facts(request)
        return RequestView(
            **request_fields(request, approvals),
            candidate_version=request["candidate_version"],
            production_version=facts.from_version if facts is not None else report.get("production_version"),
            metrics=[(name, float(value), prod.get(name)) for name, value in cand.items() if name != "questions"],
            verdict=(report.get("verdict") or {}).get("reason", ""),
            interval=interval_text((report.get("verdict") or {}).get("interval")),
            changed=list((report.get("verdict") or {}).get("changed_questions") or []),
            dagster_run_url=self.run_url(request.get("run_id")),
            candidate_url=self.asset_url(pipeline, "embedding_model"),
            report_url=self.asset_url(pipeline, "evaluation_report"),
            # A ramp that rolled back or halted launches no run: nothing to watch.
            promotion_runs_url=None if ramp_held(stages) else self.promotion_runs_url(request),
            page_url=None,
            question_set=question_set,
            questions=questions,
            online=request_evidence(self.store, request, self.online_policy(pipeline)).lines(),
            next_step=next_step(
                request,
                production_version=report.get("production_version"),
                approvals=len(approvals),
                interval_s=self.sensor_interval_s,
                ramp=ramp,
                lifecycle=lifecycle_text(self.store, request["id"]),
            ),
            rollback=facts,
            stages=[r.line() for r in stage_results(self.store, stages, self.stage_rule(pipeline))],
        )

    def evidence(self, request: dict[str, Any], *, live: bool = True) -> dict[str, Any] | None:
        """`request`'s evidence as JSON (`approvals/evidence_doc.py`), under its pipeline's policies."""
        pipeline = request.get("pipeline") or "demo"
        return evidence_doc(
            self.store,
            request,
            online=self.online_policy(pipeline),
            stage_rule=self.stage_rule(pipeline),
            live=live,
        )

    def approvers(self, request: dict[str, Any], *, escalation: bool = False) -> list[str]:
        if escalation:  # the tier that joined last
            reached = reached_tiers(request)
            return list(request_tiers(request)[reached - 1][0]) if reached else []
        return list(request.get("approvers") or []) or [LOCAL_APPROVER]

    def link(self, request: dict[str, Any], approver: str, now: datetime) -> str:
        expires = request.get("expire_at") or now + DEFAULT_LINK_TTL
        token = links.issue(
            self.link_secret,
            request_id=request["id"],
            approver=approver,
            digest=request["candidate_digest"],
            expires_at=expires,
        )
        return f"{self.public_url}/approvals/{token}"

    # -------------------------------------------------------------- one tick
    def tick(self, now: datetime) -> dict[str, list[str]]:
        summary: dict[str, list[str]] = {
            **run_deadlines(self.store.deadlines, self.store.rollouts, now),
            "announced": [],
            "updated": [],
        }
        for request in self.store.notifications.requests_to_notify():
            self.announce(request, now)
            summary["announced"].append(request["id"])
        for request in self.store.notifications.escalations_to_notify():
            self.announce_escalation(request, now)
        for request in self.store.notifications.requests_with_messages():
            if self.sync_message(request):
                summary["updated"].append(request["id"])
        return summary

    def announce(self, request: dict[str, Any], now: datetime) -> None:
        """Post a request once, under the idempotency ledger: a crash between posting and recording it is
        noticed (the claim is `started`) and the next tick says so in the message instead of posting blindly."""
        key = f"notify:{request['id']}"
        claim = self.store.effects.claim_effect(key, "notify", OWNER, now=now, stale_after=NOTIFY_STALE_AFTER)
        if claim.action == "busy":
            return
        if claim.action == "skip":  # posted earlier; only the bookkeeping was lost
            result = claim.result or {}
            self.store.notifications.mark_notified(
                request["id"],
                now=now,
                channel=result.get("channel_kind", "slack"),
                slack_channel=result.get("channel"),
                slack_ts=result.get("ts"),
                slack_status=result.get("slack_status"),
                detail={"recovered": True},
            )
            return
        resent = claim.action == "takeover"
        try:
            result = self._post(request, now, resent=resent)
        except Exception as exc:
            self.store.effects.fail_effect(key, f"{type(exc).__name__}: {exc}")
            raise
        self.store.effects.finish_effect(key, result, now=now)
        self.store.notifications.mark_notified(
            request["id"],
            now=now,
            channel=result["channel_kind"],
            slack_channel=result.get("channel"),
            slack_ts=result.get("ts"),
            slack_status=result.get("slack_status"),
            detail={"links_for": result["links_for"], "ts": result.get("ts"), "resent": resent},
        )

    def _post(self, request: dict[str, Any], now: datetime, *, resent: bool) -> dict[str, Any]:
        approvers = self.approvers(request)
        note = " (sent again: an earlier announcement was interrupted and may have gone out too)" if resent else ""
        if self.notifier is None:
            for approver in approvers:
                self.emit(
                    f"approval request {request['id']} ({subject_label(request)}) waits for "
                    f"{approver}: {self.link(request, approver, now)}{note}"
                )
            return {"channel_kind": "log", "links_for": approvers}
        view = self.view(request)
        channel, ts = self.notifier.post_request(view)
        if resent:
            self.notifier.post_thread(channel, ts, note.strip(" ()").capitalize() + ".")
        for approver in approvers:
            if approver != LOCAL_APPROVER:
                self.notifier.ephemeral(
                    channel,
                    approver,
                    f"Your personal approval link for {request['id']}: {self.link(request, approver, now)}",
                )
        return {
            "channel_kind": "slack",
            "channel": channel,
            "ts": ts,
            "links_for": approvers,
            "slack_status": view_state(
                request, len(view.approvals), None, self._verdict(request), lifecycle_text(self.store, request["id"])
            ),
        }

    def announce_escalation(self, request: dict[str, Any], now: datetime) -> None:
        approvers = self.approvers(request, escalation=True)
        text = (
            f"{' '.join(f'<@{a}>' for a in approvers) or 'Nobody is configured to escalate to'}: approval "
            f"{request['id']} for {subject_label(request)} has waited since "
            f"{request['created_at']:%Y-%m-%d %H:%M} UTC"
        )
        if self.notifier is not None and request.get("slack_ts"):
            self.notifier.post_thread(request["slack_channel"], request["slack_ts"], text)
            for approver in approvers:
                self.notifier.ephemeral(
                    request["slack_channel"],
                    approver,
                    f"Your personal approval link for {request['id']}: {self.link(request, approver, now)}",
                )
            channel = "slack"
        else:
            for approver in approvers:
                self.emit(f"escalation of {request['id']} to {approver}: {self.link(request, approver, now)}")
            channel = "log"
        self.store.notifications.mark_escalation_notified(
            request["id"], now=now, channel=channel, detail={"to": approvers}
        )

    def note(self, request: dict[str, Any], key: str, text: str, now: datetime) -> None:
        """Say `text` once about `request` (`key` names the occasion): a reply in its Slack thread, else the log.
        Under the effects ledger, so a tick run again does not say it twice."""
        claim = self.store.effects.claim_effect(key, "notify", OWNER, now=now, stale_after=NOTIFY_STALE_AFTER)
        if claim.action in ("busy", "skip"):
            return
        try:
            if self.notifier is not None and request.get("slack_ts"):
                self.notifier.post_thread(request["slack_channel"], request["slack_ts"], text)
            else:
                self.emit(f"approval request {request['id']}: {text}")
        except Exception as exc:
            self.store.effects.fail_effect(key, f"{type(exc).__name__}: {exc}")
            raise
        self.store.effects.finish_effect(key, {"said": text[:200]}, now=now)

    def after_decision(self, request_id: str, response_url: str | None = None) -> None:
        """Show a counted vote in Slack: update the request's message, or, for a message we did not post (no
        ts recorded), replace it through the click's `response_url`. Runs after the HTTP response."""
        request = self.store.requests.get_request(request_id)
        if request is None:
            return
        if request.get("slack_ts") or response_url is None:
            self.sync_message(request)
        elif self.notifier is not None:
            self.notifier.respond(response_url, self.view(request))

    def sync_message(self, request: dict[str, Any]) -> bool:
        """Bring a request's Slack message up to date with its state; True when it was updated."""
        if self.notifier is None or not request.get("slack_ts"):
            return False
        # The state first, from the votes and the ramp's stages alone: building the view reads the report and the
        # online evidence (every record of the rollout beside the request), which only a message that changed needs.
        approvals = sum(1 for v in self.store.votes.for_request(request["id"]) if v["vote"] == "approve")
        stages = self.store.rollouts.stages(request["id"])
        state = view_state(
            request, approvals, stages, self._verdict(request), lifecycle_text(self.store, request["id"])
        )
        if state == request.get("slack_status"):
            return False
        view = self.view(request)
        self.notifier.update_request(request["slack_channel"], request["slack_ts"], view)
        # The ops API holds an unscoped store: the request's own pipeline records what its message shows.
        self.store.scoped(request["pipeline"]).notifications.set_slack_status(request["id"], state)
        return True

    def _verdict(self, request: dict[str, Any]) -> str | None:
        """The online verdict a pending request's message shows (None: no rollout beside it, or decided: a decided
        message changes with its status and ramp stages, not with evidence that no longer decides)."""
        if request["status"] != "pending" or request.get("target") is not None:
            return None
        if self.store.rollouts.for_request(request["id"]) is None:  # one indexed read before any evidence
            return None
        return request_evidence(self.store, request, self.online_policy(request.get("pipeline") or "demo")).verdict


def announcer_for(
    resource: ApprovalsResource,
    store: StateStore,
    slack_channel: str | None,
    online: OnlinePolicy | None = None,
    rollout: RolloutSpec | None = None,
) -> Announcer:
    """The announcer of one pipeline's requests: Slack when a bot token and the pipeline's channel are set,
    else signed links in the log. Secrets come from the settings at run time, never from resource config."""
    settings = get_settings()
    notifier = None
    if settings.slack_bot_token and slack_channel:
        client = slack_client(settings.slack_bot_token.get_secret_value(), resource.slack_api_url)
        notifier = SlackNotifier(client, slack_channel)
    return Announcer(
        store=store,
        link_secret=settings.resolved_link_secret(),
        public_url=resource.public_url,
        dagster_url=resource.dagster_url,
        notifier=notifier,
        sensor_interval_s=sensor_interval(settings),
        online_policy=lambda _: online or OnlinePolicy(),
        stage_rule=lambda _: StageRule.of(rollout, online),
    )
