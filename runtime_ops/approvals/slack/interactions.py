"""Reading a button click: Slack's raw `payload=<JSON>` form body → a typed `Interaction`, or
`MalformedInteraction` with the precise reason (the route answers it as a 400). Pure: no I/O.

Verifying the signature (`signing.py`) must happen before this is called. Parsing is all this module does:
the click is counted in `runtime_ops.decisions.decide`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from runtime_ops.approvals.slack.blocks import ACTION_IDS, APPROVE, BLOCK_ID_PREFIX, MAX_BUTTON_VALUE
from runtime_ops.storable_text import unstorable


class MalformedInteraction(ValueError):
    """The interaction request is not an approve/reject click we understand; the message says exactly why."""


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
    def vote(self) -> Literal["approve", "reject"]:
        return "approve" if self.action_id == APPROVE else "reject"

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
    return _storable(value, name)


def _first_str(obj: Any, *paths: str) -> str | None:
    for path in paths:
        value = _get(obj, path)
        if isinstance(value, str) and value.strip():
            return _storable(value, path)
    return None


def _storable(value: str, name: str) -> str:
    problem = unstorable(value)
    if problem:  # the store cannot hold it: a 400 here, not a failed transaction later
        raise MalformedInteraction(f"field {name} contains {problem}")
    return value


SLACK_HOOKS_URL = "https://hooks.slack.com"


def response_url_problem(url: str, hooks_url: str = SLACK_HOOKS_URL) -> str | None:
    """Why the server must not POST to `url`, or None when it is on Slack's hooks origin (`hooks_url`: scheme,
    host and port; SLACK_HOOKS_URL). A response_url answers without a token, so a payload, even a signed one,
    must not be able to aim the server's POST at any other host (an internal service, loopback)."""
    try:
        got, allowed = urlsplit(url), urlsplit(hooks_url)
        got_port, allowed_port = got.port, allowed.port
    except ValueError:
        return "is not a URL"
    if got.scheme.lower() not in {"http", "https"}:
        return "is not an http(s) URL"
    default = {"http": 80, "https": 443}
    same = (
        got.scheme.lower() == allowed.scheme.lower()
        and got.hostname == (allowed.hostname or "").lower()
        and (got_port or default[got.scheme.lower()]) == (allowed_port or default.get(allowed.scheme.lower()))
        and got.username is None
        and got.password is None
    )
    return None if same else f"is not on Slack's hooks origin {hooks_url} (SLACK_HOOKS_URL)"


def parse_interaction(form_body: bytes, *, hooks_url: str = SLACK_HOOKS_URL) -> Interaction:
    """Parse Slack's `payload=<JSON>` form body of a `block_actions` click on an approval button; its
    `response_url` must be on `hooks_url` (see `response_url_problem`)."""
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
    except RecursionError:
        raise MalformedInteraction("payload JSON is nested too deeply") from None
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
    problem = response_url_problem(response_url, hooks_url)
    if problem:
        raise MalformedInteraction(f"field response_url {problem}")
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
