"""Structured logs: one JSON object per line (or a readable console line), with secrets redacted.

- `bind(**fields)`: fields (run_id, asset, batch_id, approval_id, ...) every line logged inside carries,
  held in a contextvar so threads and asyncio tasks do not see each other's values.
- `JsonFormatter` / `ConsoleFormatter`: the two formats (`RUNTIME_OPS_LOG_FORMAT=json|console`). Records that
  went through Dagster's `DagsterLogHandler` carry `dagster_meta`; the formatters read the run id, step key,
  event type (-> status) and step duration from it, duck-typed, so this module imports no Dagster.
- redaction (`runtime_ops.observability.redaction`, re-exported here): every secret setting's value, URL
  passwords, Slack tokens and signed approval-link tokens become `[REDACTED]` on every handler we configure and
  in records that only reach Dagster's event log.
- `configure_logging()`: installs all of it on the `runtime_ops` logger (Dagster processes) or on the root
  logger and uvicorn's loggers (the CLI and the ops API, processes we own).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from runtime_ops.observability.redaction import (
    REDACTED,
    REDACTOR,
    RedactionFilter,
    Redactor,
    extra_fields,
    install_record_factory,
    register_secret,
    register_settings_secrets,
)
from runtime_ops.settings import get_settings
from runtime_ops.tags import APPROVAL_TAG

__all__ = [
    "REDACTED",
    "REDACTOR",
    "RedactionFilter",
    "Redactor",
    "bind",
    "configure_logging",
    "install_record_factory",
    "log_format",
    "register_secret",
    "register_settings_secrets",
]


# Fields in the order they are written; anything else (extra=...) follows.
FIELD_ORDER = (
    "ts",
    "level",
    "logger",
    "message",
    "run_id",
    "pipeline",
    "job",
    "asset",
    "step",
    "partition",
    "status",
    "duration_ms",
    "event",
    "batch_id",
    "approval_id",
    "trace_id",
    "span_id",
)

_BOUND: ContextVar[Mapping[str, Any] | None] = ContextVar("runtime_ops_log_fields", default=None)


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Every record logged inside carries `fields` (None values are left out)."""
    token = _BOUND.set({**(_BOUND.get() or {}), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _BOUND.reset(token)


def bound_fields() -> dict[str, Any]:
    return dict(_BOUND.get() or {})


# ------------------------------------------------------------------------------------------------ redaction


# Dagster event types -> the `status` field.
_EVENT_STATUS = {
    "STEP_START": "started",
    "STEP_SUCCESS": "succeeded",
    "STEP_FAILURE": "failed",
    "STEP_UP_FOR_RETRY": "retrying",
    "STEP_RESTARTED": "restarted",
    "STEP_SKIPPED": "skipped",
    "RUN_START": "run_started",
    "RUN_SUCCESS": "run_succeeded",
    "RUN_FAILURE": "run_failed",
    "RUN_CANCELED": "run_canceled",
    "ASSET_MATERIALIZATION": "materialized",
}
PARTITION_TAG = "dagster/partition"


def _dagster_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """run_id, job, step, asset, status, duration_ms... from a DagsterLogHandler record's `dagster_meta`."""
    out: dict[str, Any] = {
        "message": meta.get("orig_message"),
        "run_id": meta.get("run_id"),
        "job": meta.get("job_name"),
    }
    step = meta.get("step_key")
    if step:
        out["step"] = step
    tags = meta.get("job_tags") or {}
    if tags.get(PARTITION_TAG):
        out["partition"] = tags[PARTITION_TAG]
    if tags.get(APPROVAL_TAG):
        out["approval_id"] = tags[APPROVAL_TAG]
    event = meta.get("dagster_event")
    if event is not None:
        event_type = getattr(getattr(event, "event_type", None), "value", None) or str(getattr(event, "event_type", ""))
        out["event"] = event_type
        data = getattr(event, "event_specific_data", None)
        if event_type == "ASSET_CHECK_EVALUATION":
            out["status"] = "check_passed" if getattr(data, "passed", False) else "check_failed"
        elif event_type in _EVENT_STATUS:
            out["status"] = _EVENT_STATUS[event_type]
        duration = getattr(data, "duration_ms", None)
        if isinstance(duration, int | float):
            out["duration_ms"] = round(float(duration), 1)
        asset_key = getattr(event, "asset_key", None)
        if asset_key is not None:
            out["asset"] = asset_key.to_user_string() if hasattr(asset_key, "to_user_string") else str(asset_key)
        if not step and getattr(event, "step_key", None):
            out["step"] = event.step_key
    return {k: v for k, v in out.items() if v is not None}


def _trace_fields() -> dict[str, str]:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - a dependency of runtime_ops
        return {}
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """Everything a line says, in FIELD_ORDER first; shared by both formats."""
    fields: dict[str, Any] = {
        "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "level": record.levelname.lower(),
        "logger": record.name,
        "message": record.getMessage(),
    }
    meta = getattr(record, "dagster_meta", None)
    if isinstance(meta, Mapping):
        fields["logger"] = f"dagster.{meta['resource_name']}" if meta.get("resource_name") else "dagster"
        fields.update(_dagster_fields(meta))
    # The record's own facts (a Dagster event's, then extra=) win over the bound step context.
    for key, value in bound_fields().items():
        fields.setdefault(key, value)
    fields.update(extra_fields(record))
    for key, value in _trace_fields().items():
        fields.setdefault(key, value)
    if record.exc_info:
        fields["exc"] = logging.Formatter().formatException(record.exc_info)
    elif record.exc_text:
        fields["exc"] = record.exc_text
    if record.stack_info:
        fields["stack"] = record.stack_info
    ordered = {k: fields[k] for k in FIELD_ORDER if fields.get(k) is not None}
    ordered.update({k: v for k, v in fields.items() if k not in ordered and v is not None})
    return ordered


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; the serialized line is redacted once more as the last line of defence."""

    def format(self, record: logging.LogRecord) -> str:
        line = json.dumps(record_fields(record), default=_json_default, ensure_ascii=False)
        return REDACTOR.text(line)


_CONSOLE_KEYS = ("run_id", "asset", "step", "status", "duration_ms", "batch_id", "approval_id")


class ConsoleFormatter(logging.Formatter):
    """`12:00:01.234 INFO  runtime_ops.api  [run=1a2b3c4d asset=raw_documents status=succeeded 12.0ms] message`."""

    def format(self, record: logging.LogRecord) -> str:
        fields = record_fields(record)
        parts = []
        for key in _CONSOLE_KEYS:
            value = fields.get(key)
            if value is None or (key == "step" and value == fields.get("asset")):
                continue
            if key == "run_id":
                parts.append(f"run={str(value)[:8]}")
            elif key == "duration_ms":
                parts.append(f"{value}ms")
            else:
                parts.append(f"{key}={value}")
        context = f" [{' '.join(parts)}]" if parts else ""
        when = fields["ts"][11:23]
        line = f"{when} {record.levelname:<7} {fields['logger']}{context} {fields['message']}"
        if fields.get("exc"):
            line += "\n" + str(fields["exc"])
        return REDACTOR.text(line)


def formatter_for(fmt: str | None = None) -> logging.Formatter:
    return ConsoleFormatter() if (fmt or log_format()) == "console" else JsonFormatter()


def log_format() -> str:
    """RUNTIME_OPS_LOG_FORMAT through the settings (json unless set); the raw variable if settings are broken."""
    try:
        return get_settings().log_format
    except Exception:
        raw = os.environ.get("RUNTIME_OPS_LOG_FORMAT", "json").strip().lower()
        return raw if raw in ("json", "console") else "json"


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the *current* sys.stderr (so test capture and reassignment work), redacting every record."""

    runtime_ops = True

    def __init__(self, formatter: logging.Formatter | None = None) -> None:
        super().__init__()
        self.setFormatter(formatter or JsonFormatter())
        self.addFilter(RedactionFilter())

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


class _NotCapturedByDagster(logging.Filter):
    """Skips records Dagster also captures (a DagsterLogHandler on the same logger re-emits them through the run's
    @loggers, i.e. the same formatter), so a line is not written twice."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self._logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(type(h).__name__ == "DagsterLogHandler" for h in self._logger.handlers)


class _AlembicChatter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Context impl", "Will assume"))


def configure_logging(*, fmt: str | None = None, root: bool = False, level: int = logging.INFO) -> logging.Handler:
    """Send runtime_ops' Python loggers (and, with `root`, every logger incl. uvicorn's) through our formatter.

    Idempotent: a handler installed earlier by this function is replaced, not duplicated.
    """
    install_record_factory()
    handler = StderrHandler(formatter_for(fmt))
    handler.setLevel(logging.NOTSET)
    target = logging.getLogger() if root else logging.getLogger("runtime_ops")
    for old in [h for h in target.handlers if getattr(h, "runtime_ops", False)]:
        target.removeHandler(old)
    target.addHandler(handler)
    if root:
        target.setLevel(level)
        ours = logging.getLogger("runtime_ops")
        for old in [h for h in ours.handlers if getattr(h, "runtime_ops", False)]:
            ours.removeHandler(old)
        ours.propagate = True
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            lg = logging.getLogger(name)
            lg.handlers.clear()
            lg.propagate = True
        # Alembic announces each of its plugins at INFO on every start; its migrations still log.
        logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
        # ... and its dialect on every schema check ("Context impl ...", "Will assume ..."); upgrades still log.
        migration = logging.getLogger("alembic.runtime.migration")
        if not any(isinstance(f, _AlembicChatter) for f in migration.filters):
            migration.addFilter(_AlembicChatter())
    else:
        handler.addFilter(_NotCapturedByDagster(target))
        target.propagate = False
    logging.getLogger("runtime_ops").setLevel(level)
    return handler
