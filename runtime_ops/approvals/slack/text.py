"""Slack mrkdwn text helpers: escaping user text, cutting to Slack's limits, mentions, links and times. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

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


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, limit), "emoji": True}


def mrkdwn(text: str, limit: int) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": truncate(text, limit)}


def mention(user_id: str) -> str:
    return f"<@{escape(user_id).replace('|', '')}>"


def mentions(user_ids: Sequence[str]) -> str:
    return ", ".join(mention(u) for u in user_ids)


def link(url: str, label: str) -> str:
    safe_url = escape(url).replace("|", "%7C")
    return f"<{safe_url}|{escape(label)}>"


def fmt_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def slack_time(moment: datetime) -> str:
    """A Slack date token: shown in each reader's own time zone, with a UTC fallback."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{fmt_time(moment)}>"


def fmt_num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}"


def fmt_delta(candidate: float, production: float | None) -> str:
    if production is None:
        return "new"
    delta = candidate - production
    return f"{delta:+.4f}"


def version_label(v: int | str | None) -> str:
    return f"v{v}" if v is not None else "none"
