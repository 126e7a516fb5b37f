"""Build interaction requests exactly as Slack sends them: signed headers and a `block_actions` form body.

`sign` is Slack's request signing (base string `v0:<timestamp>:<raw body>`, HMAC-SHA256 with the signing
secret, `X-Slack-Signature: v0=<hex>`); the tests check it against slack_sdk's own `SignatureVerifier`.
`interaction_payload` is the JSON a button click produces; `interaction_body` form-encodes it
(`payload=<urlencoded JSON>`), the body the ops API receives on `POST /slack/interactions`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

TEAM_ID = "T0TEST"
TEAM_DOMAIN = "runtime-ops-test"
APP_ID = "A0RUNTIMEOPS"
BOT_ID = "B0BOT"
BOT_USER_ID = "U0BOTUSER"

_BUTTONS = {
    "approve": {"text": "Approve", "style": "primary"},
    "reject": {"text": "Reject", "style": "danger"},
}


def sign(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The two headers Slack adds to a request it sends to the app."""
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}


def signed_headers(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """`sign` at the current time, plus the form content type: ready for an HTTP client."""
    headers = sign(secret, body, int(time.time()) if timestamp is None else timestamp)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    return headers


def _message_blocks(request_id: str) -> list[dict[str, Any]]:
    """The approval message as Slack echoes it back in the payload (it adds block_ids and `emoji`)."""
    return [
        {
            "type": "header",
            "block_id": "hdr1",
            "text": {"type": "plain_text", "text": "Promote model to production?", "emoji": True},
        },
        {
            "type": "actions",
            "block_id": f"approval:{request_id}",
            "elements": [
                {
                    "type": "button",
                    "action_id": action,
                    "text": {"type": "plain_text", "text": spec["text"], "emoji": True},
                    "style": spec["style"],
                    "value": request_id,
                }
                for action, spec in _BUTTONS.items()
            ],
        },
    ]


def interaction_payload(
    request_id: str,
    action: str,
    user_id: str,
    *,
    message_ts: str,
    action_ts: str,
    channel_id: str,
    response_url: str,
    user_name: str | None = None,
    trigger_id: str = "1234567890123.1234567890123.abcdef0123456789abcdef0123456789",
    channel_name: str = "model-approvals",
    message_blocks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON of a `block_actions` interaction for one click on an approval button."""
    name = user_name or f"user-{user_id.lower()}"
    spec = _BUTTONS.get(action, {"text": action, "style": "primary"})
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": name, "name": name, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "Shh_its_a_seekrit",  # the deprecated verification token: apps must not rely on it
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel_id,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id,
        "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_name},
        "message": {
            "type": "message",
            "subtype": "bot_message",
            "text": "Promote model to production?",
            "ts": message_ts,
            "bot_id": BOT_ID,
            "user": BOT_USER_ID,
            "blocks": message_blocks if message_blocks is not None else _message_blocks(request_id),
        },
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action,
                "block_id": f"approval:{request_id}",
                "text": {"type": "plain_text", "text": spec["text"], "emoji": True},
                "value": request_id,
                "style": spec["style"],
                "type": "button",
                "action_ts": action_ts,
            }
        ],
    }


def encode_payload(payload: dict[str, Any] | str) -> bytes:
    """`payload=<urlencoded JSON>`, the form body Slack posts (compact JSON, `+` for spaces)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return urlencode({"payload": text}).encode("ascii")


def interaction_body(
    request_id: str,
    action: str,
    user_id: str,
    *,
    message_ts: str,
    action_ts: str,
    channel_id: str,
    response_url: str,
    **extra: Any,
) -> bytes:
    """The form-encoded body of one approve/reject click (see `interaction_payload` for `extra`)."""
    return encode_payload(
        interaction_payload(
            request_id,
            action,
            user_id,
            message_ts=message_ts,
            action_ts=action_ts,
            channel_id=channel_id,
            response_url=response_url,
            **extra,
        )
    )
