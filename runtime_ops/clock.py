"""The one clock approvals read, so tests can move time (escalation, expiry) without sleeping."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)
