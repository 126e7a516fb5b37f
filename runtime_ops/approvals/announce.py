"""Announcing requests and keeping their messages true: Slack when configured, signed links in the log otherwise.

Driven by the approvals sensor on every tick, from state in the store, so a restart loses nothing: escalations,
expiries and compensations happen once, and a message that missed an update is brought up to date.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from runtime_ops.approvals import links
from runtime_ops.approvals.gate import CANARY_ALIAS, CANARY_COMPENSATION
from runtime_ops.approvals.slack.blocks import RequestView
from runtime_ops.approvals.slack.client import SlackNotifier
from runtime_ops.policies.approvals import reached_tiers, request_tiers
from runtime_ops.policies.gate_text import changed_lines, interval_text
from runtime_ops.store import StateStore, remove_alias_compensation

if TYPE_CHECKING:
    from runtime_ops.resources.state import ApprovalsResource

log = logging.getLogger("runtime_ops.approvals")

COMPENSATIONS: dict[str, Any] = {CANARY_COMPENSATION: remove_alias_compensation(CANARY_ALIAS)}
DEFAULT_LINK_TTL = timedelta(hours=24)
LOCAL_APPROVER = "local"
OWNER = f"{socket.gethostname()}:{os.getpid()}"
NOTIFY_STALE_AFTER = timedelta(minutes=2)


def view_state(request: dict[str, Any], approvals: int) -> str:
    return f"{request['status']}|{approvals}|{int(bool(request.get('escalated_at')))}"


@dataclass
class Announcer:
    store: StateStore
    link_secret: str
    public_url: str
    dagster_url: str
    notifier: SlackNotifier | None = None
    emit: Callable[[str], None] = field(default=log.warning)

    # -------------------------------------------------------------- views
    def view(self, request: dict[str, Any]) -> RequestView:
        report = self.store.evaluations.get_eval_report(request["eval_report_id"]) or {}
        cand = report.get("candidate_metrics") or {}
        prod = report.get("production_metrics") or {}
        votes = self.store.votes.for_request(request["id"])
        run_id = request.get("run_id")
        return RequestView(
            request_id=request["id"],
            candidate_version=request["candidate_version"],
            production_version=report.get("production_version"),
            candidate_digest=request["candidate_digest"],
            status=request["status"],
            required_approvals=int(request.get("required_approvals") or 1),
            approvals=[v["actor"] for v in votes if v["vote"] == "approve"],
            decided_by=[a.strip() for a in (request.get("decided_by") or "").split(",") if a.strip()],
            decision_reason=request.get("decision_reason"),
            metrics=[(name, float(value), prod.get(name)) for name, value in cand.items() if name != "questions"],
            verdict=(report.get("verdict") or {}).get("reason", ""),
            interval=interval_text((report.get("verdict") or {}).get("interval")),
            changed=changed_lines((report.get("verdict") or {}).get("changed_questions")),
            dagster_run_url=f"{self.dagster_url}/runs/{run_id}" if run_id else None,
            asset_url=f"{self.dagster_url}/assets/{request.get('pipeline') or 'demo'}/evaluation_report",
            page_url=None,
            expires_at=request.get("expire_at"),
            escalated=bool(request.get("escalated_at")),
            superseded_by=request.get("superseded_by"),
            pipeline=request.get("pipeline") or "",
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
            "escalated": [],
            "expired": [],
            "compensated": [],
            "announced": [],
            "updated": [],
        }
        summary["escalated"] = self.store.deadlines.escalate_due(now)
        summary["expired"] = self.store.deadlines.expire_due(now)
        summary["compensated"] = [rid for rid, _ in self.store.deadlines.compensate_due(COMPENSATIONS, now)]
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
                    f"approval request {request['id']} (candidate v{request['candidate_version']}) waits for "
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
            "slack_status": view_state(request, len(view.approvals)),
        }

    def announce_escalation(self, request: dict[str, Any], now: datetime) -> None:
        approvers = self.approvers(request, escalation=True)
        text = (
            f"{' '.join(f'<@{a}>' for a in approvers) or 'Nobody is configured to escalate to'}: approval "
            f"{request['id']} for candidate v{request['candidate_version']} has waited since "
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
        view = self.view(request)
        state = view_state(request, len(view.approvals))
        if state == request.get("slack_status"):
            return False
        self.notifier.update_request(request["slack_channel"], request["slack_ts"], view)
        # The ops API holds an unscoped store: the request's own pipeline records what its message shows.
        self.store.scoped(request["pipeline"]).notifications.set_slack_status(request["id"], state)
        return True


def announcer_for(resource: ApprovalsResource, store: StateStore, slack_channel: str | None) -> Announcer:
    """The announcer of one pipeline's requests: Slack when a bot token and the pipeline's channel are set,
    else signed links in the log. Secrets come from the settings at run time, never from resource config."""
    from runtime_ops.approvals.slack.client import slack_client
    from runtime_ops.settings import get_settings

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
    )
