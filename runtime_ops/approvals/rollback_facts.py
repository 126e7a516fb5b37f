"""What a rollback's approval request says (pure): the alert that asked for it, the live evidence it rests on,
the versions it moves between, and what approving or rejecting it does.

The alert sensor records these facts on the request when it opens it (`evidence: {"rollback": {...}}` on the
request row, so no column of its own), and every channel (the Slack message, the approval page, the CLI, the
JSON API) reads them back through `rollback_facts`: a rollback reads as a rollback everywhere, never as a
promotion of the older model. Plain text: each caller escapes it for its own markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from runtime_ops.labels import version_label

EVIDENCE_KEY = "rollback"
# The live windows mirror the shipped rule `RetrievalQualityRegressed`: the last 30 minutes against the day before.
NOW_WINDOW = timedelta(minutes=30)
BEFORE_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class HelpfulShare:
    """Judgements of results production showed in one window: `helpful` of `judged` (helpful + not_helpful)."""

    helpful: int
    judged: int

    @property
    def share(self) -> float | None:
        return self.helpful / self.judged if self.judged else None

    def text(self) -> str:
        share = self.share
        if share is None:
            return "no judgements"
        return f"{share:.0%} helpful ({self.helpful} of {self.judged} judgements)"


@dataclass(frozen=True)
class RollbackFacts:
    pipeline: str
    alertname: str
    fired_at: datetime
    from_version: int  # production when the alert fired
    to_version: int  # the version a rollback restores
    rule: str = ""
    summary: str = ""
    alert_id: int | None = None
    now: HelpfulShare | None = None  # the last NOW_WINDOW before the request opened
    before: HelpfulShare | None = None  # the BEFORE_WINDOW before that
    measured_at: datetime | None = None

    # ------------------------------------------------------------------ storage (the request's evidence JSON)
    def to_json(self) -> dict[str, Any]:
        def share(s: HelpfulShare | None) -> dict[str, int] | None:
            return None if s is None else {"helpful": s.helpful, "judged": s.judged}

        return {
            "pipeline": self.pipeline,
            "alertname": self.alertname,
            "alert_id": self.alert_id,
            "rule": self.rule,
            "summary": self.summary,
            "fired_at": self.fired_at.isoformat(),
            "from_version": self.from_version,
            "to_version": self.to_version,
            "live": {
                "now": share(self.now),
                "before": share(self.before),
                "now_window_s": int(NOW_WINDOW.total_seconds()),
                "before_window_s": int(BEFORE_WINDOW.total_seconds()),
                "measured_at": self.measured_at.isoformat() if self.measured_at else None,
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RollbackFacts:
        live = data.get("live") or {}

        def share(raw: Any) -> HelpfulShare | None:
            return HelpfulShare(int(raw["helpful"]), int(raw["judged"])) if raw else None

        measured = live.get("measured_at")
        return cls(
            pipeline=str(data.get("pipeline") or ""),
            alertname=str(data.get("alertname") or "an alert"),
            fired_at=datetime.fromisoformat(str(data["fired_at"])),
            from_version=int(data["from_version"]),
            to_version=int(data["to_version"]),
            rule=str(data.get("rule") or ""),
            summary=str(data.get("summary") or ""),
            alert_id=int(data["alert_id"]) if data.get("alert_id") is not None else None,
            now=share(live.get("now")),
            before=share(live.get("before")),
            measured_at=datetime.fromisoformat(measured) if measured else None,
        )

    # ------------------------------------------------------------------ words
    @property
    def current(self) -> str:
        return version_label(self.from_version)

    @property
    def target(self) -> str:
        return version_label(self.to_version)

    def title(self) -> str:
        return f"Roll back {self.pipeline} from {self.current} to {self.target}?"

    def label(self) -> str:
        """How a list names it, e.g. "rollback v4 -> v2"."""
        return f"rollback {self.current} -> {self.target}"

    def alert_line(self) -> str:
        which = f"alert #{self.alert_id} " if self.alert_id is not None else "alert "
        rule = f" (rule {self.rule})" if self.rule else ""
        text = f"{which}{self.alertname} fired at {self.fired_at:%Y-%m-%d %H:%M:%S} UTC{rule}"
        return f"{text}: {self.summary}" if self.summary else text

    def live_line(self) -> str:
        """Production's helpful share in the last 30 minutes against the day before, or that there is none."""
        now, before = self.now, self.before
        if (now is None or not now.judged) and (before is None or not before.judged):
            return "no live evidence: no helpful/not_helpful feedback on production's results in the last day"
        now_text = now.text() if now is not None else "no judgements"
        before_text = before.text() if before is not None else "no judgements"
        line = f"helpful share now (last 30 min) {now_text}, before (the day before) {before_text}"
        if now is not None and before is not None and now.share is not None and before.share is not None:
            line += f": {100 * (now.share - before.share):+.0f} points"
        return line

    def versions_line(self) -> str:
        return f"production is {self.current}; a rollback restores {self.target}"

    def on_approve(self) -> str:
        return (
            f"production moves back from {self.current} to {self.target} (the alert sensor launches the rollback run "
            f"on its next tick), and the {self.current} candidate is marked rolled back"
        )

    def on_reject(self) -> str:
        return f"production stays on {self.current}; the alert stays open and no rollback run starts"

    def lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs every channel shows, in this order."""
        return [
            ("Alert", self.alert_line()),
            ("Live evidence", self.live_line()),
            ("Versions", self.versions_line()),
            ("On approve", self.on_approve()),
            ("On reject", self.on_reject()),
        ]

    def next_step(self, status: str) -> str:
        """What the request's decision set in motion ("" while it is pending)."""
        if status == "approved":
            return f"Approved: {self.on_approve()}; production is {self.target} when that run succeeds."
        if status in ("rejected", "expired"):
            return f"Not rolled back: {self.on_reject()}."
        return ""


def rollback_facts(request: Mapping[str, Any]) -> RollbackFacts | None:
    """The rollback facts recorded on an approval request's row, or None when it is not a rollback."""
    raw = (request.get("evidence") or {}).get(EVIDENCE_KEY) if request.get("target") is None else None
    if not isinstance(raw, Mapping):
        return None
    try:
        return RollbackFacts.from_json(raw)
    except (KeyError, TypeError, ValueError):  # a row written by another version: shown as a plain request
        return None
