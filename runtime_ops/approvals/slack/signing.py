"""Is this request really from Slack? Slack's v0 request signature (HMAC-SHA256 of the raw body) plus a
freshness window against replays. Pure: slack_sdk's `SignatureVerifier` only computes the HMAC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from slack_sdk.signature import Clock, SignatureVerifier

# Slack's recommendation: a request older than this may be a replay of a captured one.
MAX_AGE_SECONDS = 300


class _EpochClock:
    """slack_sdk's SignatureVerifier asks its clock for epoch seconds; ours gives datetimes (tests move it)."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now().timestamp()


class SlackSignature:
    """Checks `X-Slack-Signature` / `X-Slack-Request-Timestamp` against the signing secret, at `now()`."""

    def __init__(self, signing_secret: str, now: Callable[[], datetime]) -> None:
        from slack_sdk.signature import SignatureVerifier

        self._clock = _EpochClock(now)
        self._verifier: SignatureVerifier = SignatureVerifier(
            signing_secret,
            clock=cast("Clock", self._clock),  # duck-typed: it only calls now()
        )

    def problem(self, body: bytes, headers: Mapping[str, str]) -> str | None:
        """Why the request is not an authentic, fresh Slack request; None when it is."""
        ts = headers.get("x-slack-request-timestamp")
        sig = headers.get("x-slack-signature")
        if not ts or not sig:
            return "missing X-Slack-Request-Timestamp or X-Slack-Signature"
        try:
            sent_at = int(ts)
        except ValueError:
            return "non-numeric X-Slack-Request-Timestamp"
        if abs(self._clock.now() - sent_at) > MAX_AGE_SECONDS:
            return "timestamp older than 5 minutes (replay?)"
        try:
            body.decode("utf-8")  # Slack signs UTF-8 text; slack_sdk would raise on anything else
        except UnicodeDecodeError:
            return "body is not UTF-8"
        return None if self._verifier.is_valid_request(body, dict(headers)) else "signature does not match"
