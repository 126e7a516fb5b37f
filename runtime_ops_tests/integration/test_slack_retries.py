"""Slack calls retry 5xx and 429 (after Retry-After) and never retry other errors, against a local Slack API."""

from __future__ import annotations

import time

import pytest

from runtime_ops.approvals.slack.client import SlackError, SlackNotifier, slack_client
from runtime_ops_tests.support.slack_server import SlackServer


def test_server_errors_and_rate_limits_are_retried_other_errors_are_not() -> None:
    with SlackServer() as server:
        notifier = SlackNotifier(slack_client("xoxb-test-token", server.base_url), "C1")
        # Without the retry a 500 would surface as SlackError; the retry delivers the message.
        server.fail_next("chat.postEphemeral", status=500, times=2)
        notifier.ephemeral("C1", "U1", "hello")
        assert [e["text"] for e in server.ephemerals] == ["hello"]

        server.fail_next("chat.postEphemeral", error="ratelimited", retry_after=1)
        started = time.monotonic()
        notifier.ephemeral("C1", "U1", "again")
        assert time.monotonic() - started >= 1.0  # waited for Retry-After
        assert [e["text"] for e in server.ephemerals] == ["hello", "again"]

        bad = SlackNotifier(slack_client("xoxb-wrong", server.base_url), "C1")
        before = len(server.calls)
        with pytest.raises(SlackError, match="invalid_auth") as exc:
            bad.ephemeral("C1", "U1", "nope")
        assert len(server.calls) == before + 1 and "xoxb-wrong" not in str(exc.value)  # not retried
