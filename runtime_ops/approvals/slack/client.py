"""Talking to Slack: the `WebClient` (through dagster-slack's `SlackResource`) and `SlackNotifier`, which posts,
updates, threads, sends ephemerals and answers `response_url`s for approval messages.

Every failure is a `SlackError` naming the Slack method and the API's error code, never the token. slack_sdk
loads only when a client is built, so importing this module stays light.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runtime_ops.approvals.slack.blocks import MAX_FALLBACK_TEXT, RequestView, request_blocks, request_text
from runtime_ops.approvals.slack.interactions import SLACK_HOOKS_URL, response_url_problem
from runtime_ops.approvals.slack.text import truncate
from runtime_ops.observability.tracing import client_span

if TYPE_CHECKING:
    import slack_sdk

DEFAULT_TIMEOUT_SECONDS = 10


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


# ---------------------------------------------------------------------------------------------- notifier


class SlackNotifier:
    """Posts and maintains approval messages in one channel through a slack_sdk `WebClient`."""

    def __init__(
        self,
        client: slack_sdk.WebClient,
        channel: str,
        *,
        timeout: float | None = None,
        hooks_url: str = SLACK_HOOKS_URL,
    ) -> None:
        """`hooks_url`: the only origin a response_url may point to (SLACK_HOOKS_URL; tests: a local server)."""
        if not channel:
            raise ValueError("a Slack channel id is required (SLACK_APPROVAL_CHANNEL)")
        self.client = client
        self.channel = channel
        self.hooks_url = hooks_url
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
        problem = response_url_problem(response_url, self.hooks_url)
        if problem:
            raise SlackError(method, "invalid_response_url", detail=f"the URL {problem}")
        from slack_sdk.webhook import WebhookClient

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
