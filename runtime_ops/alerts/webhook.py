"""Alertmanager's webhook payload (version 4) as pydantic models. Pure: no I/O, no Dagster.

An alert is identified by its fingerprint (a hash of its label set) and `startsAt`: Alertmanager re-sends the
same pair while the alert keeps firing and on every retry, and a new firing period gets a new `startsAt`.

Everything the inbox stores is checked here, so that a body the store would choke on is a 400 naming the field
(Alertmanager does not retry a 4xx) and never a 5xx it would retry for ever: times must fall within years 1-9999
in UTC as well as in their own offset, text may not hold NUL characters or lone surrogates (PostgreSQL and UTF-8
cannot store them), and a `pipeline` label must be a pipeline name.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from runtime_ops.pipeline.spec import NAME_PATTERN
from runtime_ops.storable_text import unstorable

Status = Literal["firing", "resolved"]
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _storable(text: str) -> str:
    problem = unstorable(text)
    if problem:
        raise ValueError(f"contains {problem}, which cannot be stored")
    return text


Text = Annotated[str, AfterValidator(_storable)]


def _in_utc(v: datetime, name: str) -> datetime:
    """`v` in UTC; a time whose UTC date falls outside years 1-9999 (e.g. 9999-12-31T23:59:59-01:00) is invalid."""
    try:
        return v.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{name} {v.isoformat()} is out of range once converted to UTC (years 1-9999)") from None


def _labels(v: dict[str, str]) -> dict[str, str]:
    pipeline = v.get("pipeline")
    if pipeline is not None and not NAME_PATTERN.match(pipeline):
        raise ValueError(
            f"label pipeline={pipeline[:80]!r} is not a pipeline name (1-40 lowercase letters, digits and "
            "underscores, starting with a letter)"
        )
    return v


class MalformedPayload(ValueError):
    """The body is not an Alertmanager v4 webhook; the message says what is wrong (answered 400)."""


def alert_key(fingerprint: str, starts_at: datetime) -> str:
    """The remediation run key of one firing period of one alert: `alert-<fingerprint>-<startsAt UTC>`."""
    stamp = starts_at.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return _UNSAFE.sub("-", f"alert-{fingerprint}-{stamp}")


class WebhookAlert(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    status: Status
    labels: Annotated[dict[Text, Text], AfterValidator(_labels)]
    annotations: dict[Text, Text] = Field(default_factory=dict)
    starts_at: AwareDatetime = Field(alias="startsAt")
    # A firing alert carries Go's zero time ("0001-01-01T00:00:00Z"): no end yet, kept as None.
    ends_at: AwareDatetime | None = Field(None, alias="endsAt")
    generator_url: Text = Field("", alias="generatorURL")
    fingerprint: str = Field(pattern=r"^[0-9A-Za-z]{1,64}$")

    @field_validator("starts_at")
    @classmethod
    def _starts_utc(cls, v: datetime) -> datetime:
        if v.year <= 1:
            raise ValueError("startsAt is the zero time; an alert must say when it started")
        return _in_utc(v, "startsAt")

    @field_validator("ends_at")
    @classmethod
    def _ends_utc(cls, v: datetime | None) -> datetime | None:
        if v is None or v.year <= 1:
            return None
        return _in_utc(v, "endsAt")

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def key(self) -> str:
        return alert_key(self.fingerprint, self.starts_at)

    def row(self) -> dict[str, Any]:
        """The inbox columns this alert sets."""
        return {
            "fingerprint": self.fingerprint,
            "starts_at": self.starts_at,
            "status": self.status,
            "alertname": self.alertname[:256],
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "ends_at": self.ends_at,
            "generator_url": self.generator_url,
        }


class WebhookPayload(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    version: Literal["4"]
    group_key: Text = Field(alias="groupKey")
    truncated_alerts: int = Field(0, ge=0, alias="truncatedAlerts")
    status: Status
    receiver: Text
    group_labels: dict[str, str] = Field(default_factory=dict, alias="groupLabels")
    common_labels: dict[str, str] = Field(default_factory=dict, alias="commonLabels")
    common_annotations: dict[str, str] = Field(default_factory=dict, alias="commonAnnotations")
    external_url: str = Field("", alias="externalURL")
    alerts: list[WebhookAlert]


def _shown(text: object, limit: int = 80) -> str:
    """`text` fit for a one-line message: cut to `limit`, lone surrogates escaped (the reply is UTF-8 JSON)."""
    value = str(text)
    value = value if len(value) <= limit else value[:limit] + "..."
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe(exc: ValidationError, limit: int = 5) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(_shown(p) for p in err.get("loc") or ()) or "body"
        parts.append(f"{where}: {_shown(err['msg'], 300)}")
    more = len(exc.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_payload(body: bytes | str) -> WebhookPayload:
    """Parse a webhook body; raises MalformedPayload naming the first problems."""
    try:
        data = json.loads(body)
    except RecursionError:
        raise MalformedPayload("body JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedPayload(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MalformedPayload(f"body must be a JSON object, got {type(data).__name__}")
    try:
        return WebhookPayload.model_validate(data)
    except ValidationError as exc:
        raise MalformedPayload(_describe(exc)) from None
