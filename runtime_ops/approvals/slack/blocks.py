"""The Block Kit message of an approval request: `RequestView` (what it shows) → blocks and fallback text.

Pure: no Slack client, no state store. Rendered within Slack's documented limits (Block Kit reference,
chat.postMessage); the buttons exist only while the request is pending, and their `action_id`/`block_id`/
`value` are the contract `interactions.parse_interaction` reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runtime_ops.approvals.links import LOCAL_APPROVER, display_name
from runtime_ops.approvals.rollback_facts import RollbackFacts
from runtime_ops.approvals.slack.text import (
    escape,
    fmt_delta,
    fmt_num,
    fmt_time,
    link,
    mention,
    mrkdwn,
    plain,
    slack_time,
    truncate,
    version_label,
)
from runtime_ops.policies.gate_text import changed_lines, verdict_parts

MAX_BLOCKS = 50
MAX_HEADER_TEXT = 150
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000
MAX_BUTTON_TEXT = 75
MAX_ACTION_ID = 255
MAX_BLOCK_ID = 255
MAX_BUTTON_VALUE = 2000
MAX_CONFIRM_TITLE = 100
MAX_CONFIRM_TEXT = 300
MAX_CONFIRM_BUTTON = 30
MAX_FALLBACK_TEXT = 3000  # Slack allows 40k; a notification preview needs far less

APPROVE = "approve"
REJECT = "reject"
ACTION_IDS = frozenset({APPROVE, REJECT})
BLOCK_ID_PREFIX = "approval:"
STATUSES = frozenset({"pending", "approved", "rejected", "superseded", "expired"})
MAX_METRIC_ROWS = 25


@dataclass(frozen=True)
class RequestView:
    """What one approval request shows, in its Slack message and on its approval page (`runtime_ops.api.pages`).
    Built by the caller from the state store (`Announcer.view`); rendered here as Block Kit."""

    request_id: str
    candidate_version: int | str
    production_version: int | None
    candidate_digest: str
    status: str  # pending | approved | rejected | superseded | expired
    required_approvals: int = 1
    approvals: list[str] = field(default_factory=list)  # user ids who approved so far
    decided_by: list[str] = field(default_factory=list)
    decision_reason: str | None = None
    metrics: list[tuple[str, float, float | None]] = field(default_factory=list)  # name, candidate, production
    verdict: str = ""
    interval: str = ""  # the paired bootstrap interval of candidate - production, as text
    # questions whose results changed most, as stored with the verdict (`policies/changed_questions.py`)
    changed: list[dict[str, Any]] = field(default_factory=list)
    dagster_run_url: str | None = None  # the run that opened the request
    candidate_url: str | None = None  # the candidate model's asset
    report_url: str | None = None  # the evaluation report's asset
    promotion_runs_url: str | None = None  # where to watch the run an approval starts
    page_url: str | None = None  # signed evidence/decision page, optional
    expires_at: datetime | None = None
    escalated: bool = False
    superseded_by: str | None = None
    pipeline: str = ""  # the pipeline the candidate belongs to (named in the title when set)
    question_set: str = ""  # the evaluation set both models were scored on (12 hex chars; "" when unversioned)
    questions: int | None = None  # how many of its questions were scored
    next_step: str = ""  # what the decision sets in motion, and when
    # the online evidence beside the offline, plain lines (`approvals/online_gate.RequestEvidence.lines`)
    online: list[str] = field(default_factory=list)
    # An asset gate's request (`ApprovalGate`): the gated materialization's label and its evidence (name, value);
    # None for a model promotion.
    target: str | None = None
    evidence: list[tuple[str, str]] = field(default_factory=list)
    # An alert's rollback (`approvals/rollback_facts.py`): shown as a rollback, not as a promotion of its target.
    rollback: RollbackFacts | None = None
    # The ramp after approval, one line per stage with its counts, interval and verdict (`online/stage_results.py`).
    stages: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown request status {self.status!r}; expected one of {sorted(STATUSES)}")
        if not self.request_id:
            raise ValueError("request_id must not be empty")
        block_id = BLOCK_ID_PREFIX + self.request_id
        if len(block_id) > MAX_BLOCK_ID or len(self.request_id) > MAX_BUTTON_VALUE:
            raise ValueError(f"request_id is too long for a Slack block_id ({len(self.request_id)} chars)")

    @property
    def block_id(self) -> str:
        return BLOCK_ID_PREFIX + self.request_id


def request_fields(request: Mapping[str, Any], approvals: list[str]) -> dict[str, Any]:
    """The fields of a `RequestView` that every kind of request (a model promotion, an asset gate's) fills alike:
    from its row, and `approvals`, the user ids whose approve votes counted."""
    return {
        "request_id": request["id"],
        "candidate_digest": request["candidate_digest"],
        "status": request["status"],
        "required_approvals": int(request.get("required_approvals") or 1),
        "approvals": approvals,
        "decided_by": [a.strip() for a in (request.get("decided_by") or "").split(",") if a.strip()],
        "decision_reason": request.get("decision_reason"),
        "expires_at": request.get("expire_at"),
        "escalated": bool(request.get("escalated_at")),
        "superseded_by": request.get("superseded_by"),
        "pipeline": request.get("pipeline") or "",
    }


def title(view: RequestView) -> str:
    """The question a request asks, in every channel."""
    if view.target is not None:
        return f"Approve {view.target}?"
    if view.rollback is not None:
        return view.rollback.title()
    model = f"{view.pipeline} model" if view.pipeline else "model"
    return f"Promote {model} {version_label(view.candidate_version)} to production?"


def people(user_ids: Sequence[str]) -> str:
    """Mentions, except the local identity and a policy that decided (`policy:online`): `<@local>` would render as
    an unknown user. Slack user ids have no colon."""
    return ", ".join(
        display_name(u) if u == LOCAL_APPROVER else escape(u) if ":" in u else mention(u) for u in user_ids
    )


def evaluated_on(view: RequestView) -> str:
    """e.g. "set `abc123def456`, 45 questions" (mrkdwn); "" for a report from before sets were versioned."""
    if not view.question_set:
        return ""
    count = f", {view.questions} questions" if view.questions is not None else ""
    return f"set `{escape(view.question_set)}`{count}"


def _approval_count(view: RequestView) -> str:
    return f"{len(view.approvals)} of {view.required_approvals} approval{'s' if view.required_approvals != 1 else ''}"


def outcome_text(view: RequestView, *, slack_markup: bool = True) -> str:
    """One line saying where the request stands (mrkdwn unless `slack_markup=False`)."""
    when = slack_time if slack_markup else fmt_time
    if view.status == "approved":
        who = view.decided_by or view.approvals
        return f"✅ Approved by {people(who)} ({len(who)} of {view.required_approvals})"
    if view.status == "rejected":
        who = people(view.decided_by) if view.decided_by else "an approver"
        reason = f": {escape(view.decision_reason)}" if view.decision_reason else ""
        return f"❌ Rejected by {who}{reason}"
    if view.status == "expired":
        at = f" at {when(view.expires_at)}" if view.expires_at else ""
        return f"⌛ Expired without a decision{at} — rejected (fail closed)"
    if view.status == "superseded":
        by = f" by {escape(view.superseded_by)}" if view.superseded_by else ""
        changed = "it was materialized again" if view.target is not None else "the candidate was re-trained"
        return f"↪ Superseded{by} ({changed}; this decision no longer applies)"
    # pending
    count = _approval_count(view)
    text = f"⏳ {count}: {people(view.approvals)}" if view.approvals else f"⏳ Waiting for {count}"
    if view.escalated:
        text += " · 🔔 escalated to alternate approvers"
    if view.expires_at:
        text += f" · expires {when(view.expires_at)} (rejected if undecided)"
    return text


def _metrics_table(metrics: Sequence[tuple[str, float, float | None]], limit: int, caption: str = "") -> str:
    """A monospaced candidate-vs-production table under `caption` that fits in `limit` characters (rows cut,
    never mid-row)."""
    if not metrics:
        return "_no metrics reported_"
    if caption:
        return caption + "\n" + _metrics_table(metrics, limit - len(caption) - 1)
    names = [truncate(str(name), 28) for name, _, _ in metrics]
    width = max(6, *(len(n) for n in names))
    head = f"{'metric':<{width}}  {'candidate':>9}  {'production':>10}  {'delta':>8}"
    rows = [  # pad first, escape after: the table lines up as Slack shows it (entities decoded)
        escape(f"{name:<{width}}  {fmt_num(cand):>9}  {fmt_num(prod):>10}  {fmt_delta(cand, prod):>8}")
        for name, (_, cand, prod) in zip(names, metrics, strict=True)
    ]
    fence = "```"
    reserve = 80  # room for the "… and N more metrics" line
    body = [head]
    size = len(fence) * 2 + len(head)
    for row in rows[:MAX_METRIC_ROWS]:
        if size + 1 + len(row) + reserve > limit:
            break
        body.append(row)
        size += 1 + len(row)
    shown = len(body) - 1
    text = fence + "\n".join(body) + fence
    if shown < len(rows):
        text += f"\n_… and {len(rows) - shown} more metrics (see the Dagster run)_"
    return truncate(text, limit)


# ---------------------------------------------------------------------------------------------- blocks


def _confirm(title: str, text: str, confirm: str, style: str) -> dict[str, Any]:
    return {
        "title": plain(title, MAX_CONFIRM_TITLE),
        "text": mrkdwn(text, MAX_CONFIRM_TEXT),
        "confirm": plain(confirm, MAX_CONFIRM_BUTTON),
        "deny": plain("Cancel", MAX_CONFIRM_BUTTON),
        "style": style,
    }


def _actions_block(view: RequestView) -> dict[str, Any]:
    version = version_label(view.candidate_version)
    digest = escape(view.candidate_digest[:12])
    if view.target is not None:
        subject = escape(truncate(view.target, 200))
        approving = (
            f"Approve {subject} (digest `{digest}`): what follows it runs. Your approval is recorded in the audit log."
        )
        rejecting = f"{subject} (digest `{digest}`) will not be approved; nothing that waits on it runs."
        version = truncate(view.target, 60)
    elif view.rollback is not None:
        approving = f"On approve: {escape(view.rollback.on_approve())}. Your approval is recorded in the audit log."
        rejecting = f"On reject: {escape(view.rollback.on_reject())}."
        version = f"the rollback to {view.rollback.target}"
    else:
        approving = (
            f"Promote model {version} (digest `{digest}`) to production. Your approval is recorded in the audit log."
        )
        rejecting = f"Model {version} (digest `{digest}`) will not be promoted; production stays as it is."
    return {
        "type": "actions",
        "block_id": view.block_id,
        "elements": [
            {
                "type": "button",
                "action_id": APPROVE,
                "text": plain("Approve", MAX_BUTTON_TEXT),
                "style": "primary",
                "value": view.request_id,
                "confirm": _confirm(f"Approve {version}?", approving, "Approve", "primary"),
            },
            {
                "type": "button",
                "action_id": REJECT,
                "text": plain("Reject", MAX_BUTTON_TEXT),
                "style": "danger",
                "value": view.request_id,
                "confirm": _confirm(f"Reject {version}?", rejecting, "Reject", "danger"),
            },
        ],
    }


def _evidence_blocks(view: RequestView) -> list[dict[str, Any]]:
    """The interval the gate judged and the questions whose results changed most (a shadow read of both models),
    then the online evidence from live traffic beside it."""
    parts = []
    if view.interval:
        parts.append(f"*Candidate minus production:* {escape(view.interval)}")
    if view.changed:
        lines = changed_lines(view.changed, compact=True)
        parts.append(
            "*Changed most* (relevant document's rank, production → candidate):\n"
            + "\n".join(f"• {escape(truncate(line, 300))}" for line in lines)
        )
    blocks = []
    if parts:
        blocks.append({"type": "section", "block_id": "evidence", "text": mrkdwn("\n".join(parts), MAX_SECTION_TEXT)})
    if view.online:
        text = "*Online (live traffic):*\n" + "\n".join(f"• {escape(truncate(line, 600))}" for line in view.online)
        blocks.append({"type": "section", "block_id": "online", "text": mrkdwn(text, MAX_SECTION_TEXT)})
    return blocks


def _next_step_blocks(view: RequestView) -> list[dict[str, Any]]:
    """After a decision: what it sets in motion and when, with the runs to watch. A pending request's outcome
    line already says what it waits for."""
    if view.status == "pending" or not view.next_step:
        return []
    text = f"*Next:* {escape(view.next_step)}"
    if view.status == "approved" and view.promotion_runs_url:
        text += f" {link(view.promotion_runs_url, 'Run in Dagster')}"
    return [{"type": "section", "block_id": "next_step", "text": mrkdwn(text, MAX_SECTION_TEXT)}]


def _asset_blocks(view: RequestView) -> list[dict[str, Any]]:
    """What an asset gate's request shows: the materialization's evidence, and the auto-approve rule's reason."""
    lines = [f"• {escape(truncate(name, 100))}: {escape(truncate(value, 200))}" for name, value in view.evidence]
    text = f"*{escape(truncate(view.target or '', 500))}*\n" + ("\n".join(lines) if lines else "_no evidence declared_")
    if view.verdict:
        text += f"\n*Rule:* {escape(view.verdict)}"
    return [{"type": "section", "block_id": "asset_evidence", "text": mrkdwn(text, MAX_SECTION_TEXT)}]


def _comparison_blocks(view: RequestView) -> list[dict[str, Any]]:
    """What a model promotion's request shows: both models' metrics, the verdict, the interval, the changes."""
    on = evaluated_on(view)
    # Production is re-scored on the candidate's set, so its numbers here can differ from its own report's.
    prod = f"production {version_label(view.production_version)}" if view.production_version is not None else None
    if prod and on:
        prod += f" (re-scored on {on})"
    comparing = (
        f"Candidate *{version_label(view.candidate_version)}* vs {prod}"
        if prod
        else f"Candidate *{version_label(view.candidate_version)}* (no model in production yet)"
    )
    words, rest = verdict_parts(view.verdict)
    verdict = f"*{escape(words)}*" + (f": {escape(rest)}" if rest else "") if view.verdict else "_no verdict_"
    intro = f"{comparing}\n*Verdict:* "
    caption = f"Both columns scored on evaluation {on}" if on else ""
    return [
        {"type": "section", "text": mrkdwn(intro + verdict, MAX_SECTION_TEXT)},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _metrics_table(view.metrics, MAX_SECTION_TEXT, caption)},
        },
        *_evidence_blocks(view),
    ]


def _body_blocks(view: RequestView) -> list[dict[str, Any]]:
    """An asset gate's evidence; an alert's rollback (its alert, live evidence, versions, both outcomes); or a
    promotion's comparison, then its ramp's stage results."""
    if view.target is not None:
        return _asset_blocks(view)
    if view.rollback is not None:
        text = "\n".join(f"*{label}:* {escape(line)}" for label, line in view.rollback.lines())
        return [{"type": "section", "block_id": "rollback", "text": mrkdwn(text, MAX_SECTION_TEXT)}]
    ramp = "*Ramp:*\n" + "\n".join(f"• {escape(truncate(line, 500))}" for line in view.stages)
    ramp_block = {"type": "section", "block_id": "ramp", "text": mrkdwn(ramp, MAX_SECTION_TEXT)}
    return [*_comparison_blocks(view), *([ramp_block] if view.stages else [])]


def request_blocks(view: RequestView) -> list[dict[str, Any]]:
    """The Block Kit message for an approval request; buttons only while it is pending."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain(title(view), MAX_HEADER_TEXT)},
        *_body_blocks(view),
        {"type": "section", "block_id": "outcome", "text": mrkdwn(outcome_text(view), MAX_SECTION_TEXT)},
        *_next_step_blocks(view),
    ]

    context: list[str] = [
        f"Request `{escape(truncate(view.request_id, 80))}`",
        f"Digest `{escape(view.candidate_digest[:12])}`",
    ]
    if view.expires_at and view.status == "pending":
        context.append(f"Expires {slack_time(view.expires_at)}")
    links = []
    if view.dagster_run_url:
        links.append(link(view.dagster_run_url, "Dagster run"))
    if view.candidate_url:
        links.append(link(view.candidate_url, "Asset in Dagster" if view.target is not None else "Candidate model"))
    if view.report_url:
        links.append(link(view.report_url, "Evaluation report"))
    if view.page_url and view.status == "pending":
        links.append(link(view.page_url, "Evidence page"))
    if links:
        context.append(" · ".join(links))
    blocks.append(
        {
            "type": "context",
            "elements": [mrkdwn(item, MAX_CONTEXT_TEXT) for item in context[:MAX_CONTEXT_ELEMENTS]],
        }
    )
    if view.status == "pending":
        blocks.append(_actions_block(view))
    return blocks[:MAX_BLOCKS]


def request_text(view: RequestView) -> str:
    """The plain fallback `text` (notifications, screen readers, clients without Block Kit)."""
    text = f"{title(view)} {outcome_text(view, slack_markup=False)} (request {view.request_id})"
    return truncate(text, MAX_FALLBACK_TEXT)
