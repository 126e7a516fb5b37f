"""The Slack side of approvals: the message a request shows, posting/updating it, and reading button clicks.

No Dagster and no state store here: the caller decides (one compare-and-set in the store) and then asks this
module to render and deliver the outcome. Everything Slack-specific lives here:

- `slack_client` builds a `slack_sdk.WebClient` through dagster-slack's `SlackResource` and points it at
  `SLACK_API_URL` when set (tests use a local Slack API server).
- `RequestView` is what one approval message shows; `request_blocks` / `request_text` render it as Block
  Kit within Slack's limits. Buttons exist only while the request is pending.
- `SlackNotifier` posts, updates, threads, sends ephemerals and answers `response_url`s; every failure is a
  `SlackError` naming the Slack method and the API's error code, never the token.
- `parse_interaction` turns the form body of a `block_actions` request into an `Interaction`, or raises
  `MalformedInteraction` with the precise reason. (Verifying the signature is the HTTP layer's job, and
  must happen before this is called.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:  # keep the import of this module light: slack_sdk loads only when a client is built
    import slack_sdk

DEFAULT_TIMEOUT_SECONDS = 10

# Slack's documented limits (Block Kit reference, chat.postMessage).
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


# ---------------------------------------------------------------------------------------------- client


def slack_client(token: str, api_url: str | None) -> slack_sdk.WebClient:
    """A WebClient built by dagster-slack's `SlackResource`, aimed at `api_url` (e.g. a test server) if given."""
    from dagster_slack import SlackResource

    if not token or not token.strip():
        raise ValueError("a Slack bot token is required (SLACK_BOT_TOKEN)")
    client = SlackResource(token=token).get_client()
    if api_url:
        client.base_url = api_url if api_url.endswith("/") else api_url + "/"
    client.timeout = DEFAULT_TIMEOUT_SECONDS
    # slack_sdk's own retry handlers: connection errors (installed by default), 429 after its Retry-After, and
    # 500/503 with exponential backoff and jitter. Other errors (4xx, ok=false) are never retried.
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler
    from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator

    client.retry_handlers.extend(
        [
            RateLimitErrorRetryHandler(max_retry_count=2),
            ServerErrorRetryHandler(
                max_retry_count=3, interval_calculator=BackoffRetryIntervalCalculator(backoff_factor=0.25)
            ),
        ]
    )
    return client


# ---------------------------------------------------------------------------------------------- errors


class SlackError(RuntimeError):
    """A Slack call failed. The message is `"<method> failed: <error code>"`; it never carries the token.

    `error` is Slack's error code (`invalid_auth`, `message_not_found`, `ratelimited`, ...) or a local one
    (`http_500`, `timeout`, `connection_error`); `retryable` says whether trying again later can help.
    """

    def __init__(
        self,
        method: str,
        error: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        detail: str | None = None,
    ) -> None:
        self.method = method
        self.error = error
        self.status = status
        self.retry_after = retry_after
        message = f"{method} failed: {error}"
        if status is not None and status != 200:
            message += f" (HTTP {status})"
        if retry_after is not None:
            message += f", retry after {retry_after:g}s"
        if detail:
            message += f" - {detail}"
        super().__init__(message)

    @property
    def retryable(self) -> bool:
        if self.error in {"ratelimited", "timeout", "connection_error", "internal_error", "fatal_error"}:
            return True
        return self.error in {"service_unavailable", "request_timeout"} or (self.status or 0) >= 500


class MalformedInteraction(ValueError):
    """The interaction request is not an approve/reject click we understand; the message says exactly why."""


# ---------------------------------------------------------------------------------------------- view


@dataclass(frozen=True)
class RequestView:
    """What one approval message shows. Built by the caller from the state store; rendered here."""

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
    dagster_run_url: str | None = None
    asset_url: str | None = None
    page_url: str | None = None  # signed evidence/decision page, optional
    expires_at: datetime | None = None
    escalated: bool = False
    superseded_by: str | None = None

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


# ---------------------------------------------------------------------------------------------- text helpers

_ENTITY_TAIL = re.compile(r"&[a-z]{0,3}$")


def escape(text: str) -> str:
    """Escape Slack's control characters so user text can't become a link, mention or `<!channel>`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, limit: int, suffix: str = "…") -> str:
    """Cut `text` to at most `limit` characters, never in the middle of an `&amp;`-style entity."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - len(suffix), 0)]
    cut = _ENTITY_TAIL.sub("", cut)
    return cut + suffix


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, limit), "emoji": True}


def _mrkdwn(text: str, limit: int) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": truncate(text, limit)}


def _mention(user_id: str) -> str:
    return f"<@{escape(user_id).replace('|', '')}>"


def _mentions(user_ids: Sequence[str]) -> str:
    return ", ".join(_mention(u) for u in user_ids)


def _link(url: str, label: str) -> str:
    safe_url = escape(url).replace("|", "%7C")
    return f"<{safe_url}|{escape(label)}>"


def _fmt_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _slack_time(moment: datetime) -> str:
    """A Slack date token: shown in each reader's own time zone, with a UTC fallback."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{_fmt_time(moment)}>"


def _fmt_num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}"


def _fmt_delta(candidate: float, production: float | None) -> str:
    if production is None:
        return "new"
    delta = candidate - production
    return f"{delta:+.4f}"


def _version(v: int | str | None) -> str:
    return f"v{v}" if v is not None else "none"


def _title(view: RequestView) -> str:
    return f"Promote model {_version(view.candidate_version)} to production?"


def _approval_count(view: RequestView) -> str:
    return f"{len(view.approvals)} of {view.required_approvals} approval{'s' if view.required_approvals != 1 else ''}"


def outcome_text(view: RequestView, *, slack_markup: bool = True) -> str:
    """One line saying where the request stands (mrkdwn unless `slack_markup=False`)."""
    when = _slack_time if slack_markup else _fmt_time
    if view.status == "approved":
        who = view.decided_by or view.approvals
        return f"✅ Approved by {_mentions(who)} ({len(who)} of {view.required_approvals})"
    if view.status == "rejected":
        who = _mentions(view.decided_by) if view.decided_by else "an approver"
        reason = f": {escape(view.decision_reason)}" if view.decision_reason else ""
        return f"❌ Rejected by {who}{reason}"
    if view.status == "expired":
        at = f" at {when(view.expires_at)}" if view.expires_at else ""
        return f"⌛ Expired without a decision{at} — rejected (fail closed)"
    if view.status == "superseded":
        by = f" by {escape(view.superseded_by)}" if view.superseded_by else ""
        return f"↪ Superseded{by} (the candidate was re-trained; this decision no longer applies)"
    # pending
    count = _approval_count(view)
    text = f"⏳ {count}: {_mentions(view.approvals)}" if view.approvals else f"⏳ Waiting for {count}"
    if view.escalated:
        text += " · 🔔 escalated to alternate approvers"
    if view.expires_at:
        text += f" · expires {when(view.expires_at)} (rejected if undecided)"
    return text


def _metrics_table(metrics: Sequence[tuple[str, float, float | None]], limit: int) -> str:
    """A monospaced candidate-vs-production table that fits in `limit` characters (rows cut, never mid-row)."""
    if not metrics:
        return "_no metrics reported_"
    names = [truncate(str(name), 28) for name, _, _ in metrics]
    width = max(6, *(len(n) for n in names))
    head = f"{'metric':<{width}}  {'candidate':>9}  {'production':>10}  {'delta':>8}"
    rows = [  # pad first, escape after: the table lines up as Slack shows it (entities decoded)
        escape(f"{name:<{width}}  {_fmt_num(cand):>9}  {_fmt_num(prod):>10}  {_fmt_delta(cand, prod):>8}")
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
        "title": _plain(title, MAX_CONFIRM_TITLE),
        "text": _mrkdwn(text, MAX_CONFIRM_TEXT),
        "confirm": _plain(confirm, MAX_CONFIRM_BUTTON),
        "deny": _plain("Cancel", MAX_CONFIRM_BUTTON),
        "style": style,
    }


def _actions_block(view: RequestView) -> dict[str, Any]:
    version = _version(view.candidate_version)
    digest = escape(view.candidate_digest[:12])
    return {
        "type": "actions",
        "block_id": view.block_id,
        "elements": [
            {
                "type": "button",
                "action_id": APPROVE,
                "text": _plain("Approve", MAX_BUTTON_TEXT),
                "style": "primary",
                "value": view.request_id,
                "confirm": _confirm(
                    f"Approve {version}?",
                    f"Promote model {version} (digest `{digest}`) to production. Your approval is recorded "
                    "in the audit log.",
                    "Approve",
                    "primary",
                ),
            },
            {
                "type": "button",
                "action_id": REJECT,
                "text": _plain("Reject", MAX_BUTTON_TEXT),
                "style": "danger",
                "value": view.request_id,
                "confirm": _confirm(
                    f"Reject {version}?",
                    f"Model {version} (digest `{digest}`) will not be promoted; production stays as it is.",
                    "Reject",
                    "danger",
                ),
            },
        ],
    }


def request_blocks(view: RequestView) -> list[dict[str, Any]]:
    """The Block Kit message for an approval request; buttons only while it is pending."""
    prod = f"production {_version(view.production_version)}" if view.production_version is not None else None
    comparing = (
        f"Candidate *{_version(view.candidate_version)}* vs {prod}"
        if prod
        else f"Candidate *{_version(view.candidate_version)}* (no model in production yet)"
    )
    verdict = escape(view.verdict) if view.verdict else "_no verdict_"
    intro = f"{comparing}\n*Verdict:* "
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(_title(view), MAX_HEADER_TEXT)},
        {"type": "section", "text": _mrkdwn(intro + verdict, MAX_SECTION_TEXT)},
        {"type": "section", "text": {"type": "mrkdwn", "text": _metrics_table(view.metrics, MAX_SECTION_TEXT)}},
        {"type": "section", "block_id": "outcome", "text": _mrkdwn(outcome_text(view), MAX_SECTION_TEXT)},
    ]

    context: list[str] = [
        f"Request `{escape(truncate(view.request_id, 80))}`",
        f"Digest `{escape(view.candidate_digest[:12])}`",
    ]
    if view.expires_at and view.status == "pending":
        context.append(f"Expires {_slack_time(view.expires_at)}")
    links = []
    if view.dagster_run_url:
        links.append(_link(view.dagster_run_url, "Dagster run"))
    if view.asset_url:
        links.append(_link(view.asset_url, "Asset"))
    if view.page_url and view.status == "pending":
        links.append(_link(view.page_url, "Evidence page"))
    if links:
        context.append(" · ".join(links))
    blocks.append(
        {
            "type": "context",
            "elements": [_mrkdwn(item, MAX_CONTEXT_TEXT) for item in context[:MAX_CONTEXT_ELEMENTS]],
        }
    )
    if view.status == "pending":
        blocks.append(_actions_block(view))
    return blocks[:MAX_BLOCKS]


def request_text(view: RequestView) -> str:
    """The plain fallback `text` (notifications, screen readers, clients without Block Kit)."""
    text = f"{_title(view)} {outcome_text(view, slack_markup=False)} (request {view.request_id})"
    return truncate(text, MAX_FALLBACK_TEXT)


# ---------------------------------------------------------------------------------------------- notifier


class SlackNotifier:
    """Posts and maintains approval messages in one channel through a slack_sdk `WebClient`."""

    def __init__(self, client: slack_sdk.WebClient, channel: str, *, timeout: float | None = None) -> None:
        if not channel:
            raise ValueError("a Slack channel id is required (SLACK_APPROVAL_CHANNEL)")
        self.client = client
        self.channel = channel
        self.timeout = timeout if timeout is not None else (getattr(client, "timeout", None) or DEFAULT_TIMEOUT_SECONDS)

    def post_request(self, view: RequestView) -> tuple[str, str]:
        """Post the request message; returns (channel id, ts) — keep both to update the message later."""
        resp = self._call(
            "chat.postMessage",
            lambda: self.client.chat_postMessage(
                channel=self.channel,
                text=request_text(view),
                blocks=request_blocks(view),
                unfurl_links=False,
                unfurl_media=False,
            ),
        )
        channel, ts = resp.get("channel"), resp.get("ts")
        if not channel or not ts:
            raise SlackError("chat.postMessage", "missing_channel_or_ts_in_response")
        return str(channel), str(ts)

    def update_request(self, channel: str, ts: str, view: RequestView) -> None:
        """Re-render the message in place (decided/expired/superseded messages lose their buttons)."""
        self._call(
            "chat.update",
            lambda: self.client.chat_update(
                channel=channel, ts=ts, text=request_text(view), blocks=request_blocks(view)
            ),
        )

    def post_thread(self, channel: str, ts: str, text: str) -> None:
        """A reply in the request's thread, e.g. the escalation mention of alternate approvers."""
        self._call(
            "chat.postMessage",
            lambda: self.client.chat_postMessage(channel=channel, thread_ts=ts, text=truncate(text, MAX_FALLBACK_TEXT)),
        )

    def ephemeral(self, channel: str, user: str, text: str) -> None:
        """A message only `user` sees (e.g. "you may not approve your own request")."""
        self._call(
            "chat.postEphemeral",
            lambda: self.client.chat_postEphemeral(channel=channel, user=user, text=truncate(text, MAX_FALLBACK_TEXT)),
        )

    def respond(self, response_url: str, view: RequestView) -> None:
        """Replace the clicked message through the interaction's `response_url` (no token needed)."""
        self._post_response(
            response_url, {"replace_original": True, "text": request_text(view), "blocks": request_blocks(view)}
        )

    def respond_ephemeral(self, response_url: str, text: str) -> None:
        """Answer only the person who clicked (e.g. why their click changed nothing), leaving the message."""
        self._post_response(
            response_url, {"response_type": "ephemeral", "replace_original": False, "text": truncate(text, 3000)}
        )

    def _post_response(self, response_url: str, payload: dict[str, Any]) -> None:
        method = "response_url"
        scheme = urlsplit(response_url).scheme.lower()
        if scheme not in {"http", "https"}:
            raise SlackError(method, "invalid_response_url", detail=f"scheme {scheme or '(none)'!r} is not http(s)")
        from slack_sdk.webhook import WebhookClient

        from runtime_ops.observability.tracing import client_span

        webhook = WebhookClient(response_url, timeout=int(max(1, round(self.timeout))))
        parts = urlsplit(response_url)
        try:
            # The path of a response_url is a capability (it answers without a token): only the host is kept.
            with client_span("slack response_url", method="POST", url=f"{parts.scheme}://{parts.netloc}/") as span:
                resp = webhook.send_dict(payload)
                span.status_code(resp.status_code)
        except TimeoutError as exc:
            raise SlackError(method, "timeout") from exc
        except OSError as exc:
            raise SlackError(method, "connection_error", detail=type(exc).__name__) from exc
        if resp.status_code != 200:
            body = (resp.body or "").strip()
            code = body if re.fullmatch(r"[a-z_]{1,64}", body) else f"http_{resp.status_code}"
            retry_after = _retry_after(resp.headers)
            raise SlackError(method, code, status=resp.status_code, retry_after=retry_after)

    # -- internals

    def _call(self, method: str, call: Callable[[], Any]) -> Any:
        from slack_sdk.errors import SlackApiError, SlackClientError

        from runtime_ops.observability.tracing import client_span

        url = f"{getattr(self.client, 'base_url', '') or ''}{method}"
        try:
            # A CLIENT span per Web API call (slack_sdk's own retries included); the token is in a header.
            with client_span(f"slack {method}", method="POST", url=url, **{"rpc.method": method}) as span:
                try:
                    response = call()
                except SlackApiError as exc:
                    span.status_code(getattr(exc.response, "status_code", None))
                    raise
                span.status_code(getattr(response, "status_code", None))
                return response
        except SlackApiError as exc:
            raise self._api_error(method, exc) from None
        except TimeoutError as exc:
            raise SlackError(method, "timeout") from exc
        except OSError as exc:  # URLError, connection refused/reset
            raise SlackError(method, "connection_error", detail=self._redact(type(exc).__name__)) from exc
        except SlackClientError as exc:
            raise SlackError(method, "client_error", detail=self._redact(str(exc))[:200]) from exc

    def _api_error(self, method: str, exc: Any) -> SlackError:
        response = exc.response
        status = getattr(response, "status_code", None)
        data = getattr(response, "data", None)
        code = data.get("error") if isinstance(data, dict) else None
        if not isinstance(code, str) or not re.fullmatch(r"[a-z0-9_.]{1,64}", code):
            code = f"http_{status}" if status and status != 200 else "unknown_error"
        retry_after = _retry_after(getattr(response, "headers", None) or {})
        return SlackError(method, self._redact(code), status=status, retry_after=retry_after)

    def _redact(self, text: str) -> str:
        token = getattr(self.client, "token", None)
        return text.replace(token, "[redacted]") if token else text


def _retry_after(headers: Any) -> float | None:
    for key in ("Retry-After", "retry-after"):
        value = headers.get(key) if hasattr(headers, "get") else None
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            try:
                return float(value)
            except (TypeError, ValueError):
                return None
    return None


# ---------------------------------------------------------------------------------------------- interactions


@dataclass(frozen=True)
class Interaction:
    """One approve/reject click, as Slack delivered it."""

    type: str
    user_id: str
    user_name: str
    action_id: str  # approve | reject
    value: str  # the request id
    block_id: str
    action_ts: str
    message_ts: str
    channel_id: str
    response_url: str
    trigger_id: str

    @property
    def request_id(self) -> str:
        return self.value

    @property
    def decision(self) -> str:
        return "approved" if self.action_id == APPROVE else "rejected"

    @property
    def dedupe_key(self) -> str:
        """Slack redelivers the same click with the same values: one key per (message, click, user)."""
        return f"{self.message_ts}:{self.action_ts}:{self.user_id}"


def _get(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur or cur[part] is None:
            return None
        cur = cur[part]
    return cur


def _require_str(obj: Any, path: str, *, label: str | None = None) -> str:
    value = _get(obj, path)
    name = label or path
    if value is None:
        raise MalformedInteraction(f"missing field {name}")
    if not isinstance(value, str):
        raise MalformedInteraction(f"field {name} is not a string")
    if not value.strip():
        raise MalformedInteraction(f"field {name} is empty")
    return value


def _first_str(obj: Any, *paths: str) -> str | None:
    for path in paths:
        value = _get(obj, path)
        if isinstance(value, str) and value.strip():
            return value
    return None


def parse_interaction(form_body: bytes) -> Interaction:
    """Parse Slack's `payload=<JSON>` form body of a `block_actions` click on an approval button."""
    try:
        text = form_body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedInteraction("body is not UTF-8") from exc
    try:
        form = parse_qs(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=20)
    except ValueError as exc:
        raise MalformedInteraction("body is not application/x-www-form-urlencoded") from exc
    values = form.get("payload")
    if not values:
        raise MalformedInteraction("missing form field 'payload'")
    if len(values) > 1:
        raise MalformedInteraction("form field 'payload' appears more than once")
    try:
        payload = json.loads(values[0])
    except ValueError as exc:
        raise MalformedInteraction("payload is not JSON") from exc
    if not isinstance(payload, dict):
        raise MalformedInteraction("payload is not a JSON object")

    kind = _require_str(payload, "type")
    if kind != "block_actions":
        raise MalformedInteraction(f"unsupported interaction type {kind!r}")
    user_id = _require_str(payload, "user.id")
    user_name = _first_str(payload, "user.username", "user.name") or ""

    actions = payload.get("actions")
    if not isinstance(actions, list):
        raise MalformedInteraction("missing field actions")
    if len(actions) != 1:
        raise MalformedInteraction(f"expected exactly one action, got {len(actions)}")
    action = actions[0]
    if not isinstance(action, dict):
        raise MalformedInteraction("actions[0] is not an object")
    action_id = _require_str(action, "action_id", label="actions[0].action_id")
    if action_id not in ACTION_IDS:
        raise MalformedInteraction(f"unknown action_id {action_id!r}")
    value = _require_str(action, "value", label="actions[0].value")
    if len(value) > MAX_BUTTON_VALUE:
        raise MalformedInteraction(f"actions[0].value is longer than {MAX_BUTTON_VALUE} characters")
    block_id = _require_str(action, "block_id", label="actions[0].block_id")
    if block_id != BLOCK_ID_PREFIX + value:
        raise MalformedInteraction(f"actions[0].block_id {block_id!r} does not match its value {value!r}")
    action_ts = _require_str(action, "action_ts", label="actions[0].action_ts")

    message_ts = _first_str(payload, "container.message_ts", "message.ts")
    if message_ts is None:
        raise MalformedInteraction("missing field container.message_ts")
    channel_id = _first_str(payload, "container.channel_id", "channel.id")
    if channel_id is None:
        raise MalformedInteraction("missing field channel.id")
    response_url = _require_str(payload, "response_url")
    if urlsplit(response_url).scheme.lower() not in {"http", "https"}:
        raise MalformedInteraction("field response_url is not an http(s) URL")
    trigger_id = _first_str(payload, "trigger_id") or ""

    return Interaction(
        type=kind,
        user_id=user_id,
        user_name=user_name,
        action_id=action_id,
        value=value,
        block_id=block_id,
        action_ts=action_ts,
        message_ts=message_ts,
        channel_id=channel_id,
        response_url=response_url,
        trigger_id=trigger_id,
    )
