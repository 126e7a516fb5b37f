"""Structured logs: one JSON object per line (or a readable console line), with secrets redacted.

- `bind(**fields)`: fields (run_id, asset, batch_id, approval_id, ...) every line logged inside carries,
  held in a contextvar so threads and asyncio tasks do not see each other's values.
- `JsonFormatter` / `ConsoleFormatter`: the two formats (`RUNTIME_OPS_LOG_FORMAT=json|console`). Records that
  went through Dagster's `DagsterLogHandler` carry `dagster_meta`; the formatters read the run id, step key,
  event type (-> status) and step duration from it, duck-typed, so this module imports no Dagster.
- `Redactor` / `RedactionFilter`: replace the value of every secret setting, URL passwords, Slack tokens and
  signed approval-link tokens with `[REDACTED]` in the message, its args and every extra field. The filter
  sits on every handler we configure; a log-record factory redacts message and args at creation as well, so
  records that only reach Dagster's event log (the UI) are clean too.
- `configure_logging()`: installs all of it on the `runtime_ops` logger (Dagster processes) or on the root
  logger and uvicorn's loggers (the CLI and the ops API, processes we own).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

REDACTED = "[REDACTED]"

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

# Setting names whose values are secrets (the SecretStr fields of runtime_ops.settings.Settings, plus the
# cloud credentials boto3 reads from the environment).
SECRET_SETTINGS = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "RUNTIME_OPS_LINK_SECRET",
    "RUNTIME_OPS_MODEL_API_KEY",
    "RUNTIME_OPS_WEBHOOK_SECRET",
    "RUNTIME_OPS_ALERT_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
URL_SETTINGS = ("RUNTIME_OPS_DATABASE_URL", "REDIS_URL")
# Shorter values are too likely to occur by chance ("pw" in "pwd"); they are still removed from URLs by pattern.
MIN_SECRET_LENGTH = 6

_PATTERNS = (
    # The token segment of signed approval links (/approvals/<token>), whatever host serves them.
    (re.compile(r"(/approvals/)[A-Za-z0-9_\-.%]{16,}"), r"\1" + REDACTED),
    # A bare itsdangerous/JWT-style token: base64 JSON ('{"...' = 'eyJ') or, compressed, '.' + zlib ('eJ'),
    # then a signature.
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-.]{16,}"), REDACTED),
    (re.compile(r"\.eJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"), REDACTED),
    # Slack tokens (bot, user, app, refresh...).
    (re.compile(r"\bxox[abeoprs]-[A-Za-z0-9\-]{8,}"), REDACTED),
    # The password of any URL with credentials (postgresql://user:pw@host, redis://:pw@host).
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)[^\s@/]+(@)"), r"\1" + REDACTED + r"\2"),
    # Bearer credentials in headers that end up in messages.
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9_\-.~+/=]{8,}"), r"\1" + REDACTED),
)


def _url_password(url: str | None) -> str | None:
    if not url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


class Redactor:
    """Replaces secret values and secret-shaped substrings with `[REDACTED]`.

    The secret values come from the current settings (re-read when `get_settings()` returns a new object,
    which tests do by clearing its cache) and from `register()` (e.g. the generated link secret).
    """

    def __init__(self) -> None:
        self._extra: set[str] = set()
        self._lock = threading.Lock()
        self._cache_key: tuple[int, frozenset[str]] | None = None
        self._values: tuple[str, ...] = ()
        self._checked_ident = 0
        self._checked_until = 0.0

    def register(self, *values: str | None) -> None:
        with self._lock:
            self._extra.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)
            self._cache_key = None

    def _settings_values(self) -> tuple[int, list[str]]:
        values: list[str] = []
        ident = 0
        try:
            from runtime_ops.settings import get_settings

            settings = get_settings()
            ident = id(settings)
            for field in ("slack_bot_token", "slack_signing_secret", "link_secret", "model_api_key"):
                secret = getattr(settings, field)
                values.append(secret.get_secret_value() if secret else "")
            for field in ("webhook_secret", "alert_token"):
                secret = getattr(settings, field)
                values.append(secret.get_secret_value() if secret else "")
            values += [_url_password(settings.database_url) or "", _url_password(settings.redis_url) or ""]
            link_file = settings.resolved_home / "link_secret"
            if not settings.link_secret and link_file.is_file():
                values.append(link_file.read_text().strip())
        except Exception:  # invalid settings are reported elsewhere; fall back to the raw environment
            pass
        # The environment as well: it is what a process was given, even if settings were built from overrides.
        values += [os.environ.get(name, "") for name in SECRET_SETTINGS]
        values += [_url_password(os.environ.get(name)) or "" for name in URL_SETTINGS]
        return ident, values

    def values(self) -> tuple[str, ...]:
        # Re-read at most every second for the same settings object: a stat() and a settings walk per record
        # would cost more than the rest of the line.
        now = time.monotonic()
        ident = self._current_settings_id()
        with self._lock:
            if self._cache_key is not None and ident == self._checked_ident and now < self._checked_until:
                return self._values
        ident, found = self._settings_values()
        key = (ident, frozenset(found))
        with self._lock:
            if key != self._cache_key:
                found_all = {v for v in found if v and len(v) >= MIN_SECRET_LENGTH} | self._extra
                # Longest first, so a secret containing another is replaced whole.
                self._values = tuple(sorted(found_all, key=len, reverse=True))
                self._cache_key = key
            self._checked_ident, self._checked_until = ident, now + 1.0
            return self._values

    @staticmethod
    def _current_settings_id() -> int:
        try:
            from runtime_ops.settings import get_settings

            return id(get_settings())
        except Exception:
            return 0

    def text(self, text: str, values: Iterable[str] | None = None) -> str:
        for value in self.values() if values is None else values:
            if value in text:
                text = text.replace(value, REDACTED)
        for pattern, repl in _PATTERNS:
            text = pattern.sub(repl, text)
        return text

    def value(self, value: Any, values: tuple[str, ...] | None = None, depth: int = 0) -> Any:
        """Redact strings inside `value` (str, bytes, mappings, sequences); other types are kept as they are."""
        values = self.values() if values is None else values
        if isinstance(value, str):
            return self.text(value, values)
        if isinstance(value, bytes):
            return self.text(value.decode("utf-8", "replace"), values)
        if depth > 4:
            return value
        if isinstance(value, Mapping):
            return {k: self.value(v, values, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return type(value)(self.value(v, values, depth + 1) for v in value)
        return value


REDACTOR = Redactor()


def register_secret(*values: str | None) -> None:
    """Treat these values as secrets in every log line of this process (e.g. a generated link secret)."""
    REDACTOR.register(*values)


# color_message: uvicorn's ANSI-colored copy of the message.
_STANDARD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName", "color_message"}
_DAGSTER_ATTRS = frozenset({"dagster_meta", "dagster_event", "dagster_event_batch_metadata"})


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """What `extra=` added to the record (everything that is not a standard LogRecord attribute)."""
    return {
        k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS and k not in _DAGSTER_ATTRS and k[0] != "_"
    }


def _redact_message(record: logging.LogRecord, values: tuple[str, ...]) -> None:
    """Format the message now (args can be any object whose str() carries a secret, e.g. an httpx.URL) and
    keep only its redacted text."""
    if record.args:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it for logging's own error report
            return
        record.msg, record.args = REDACTOR.text(message, values), ()
    elif isinstance(record.msg, str):
        record.msg = REDACTOR.text(record.msg, values)


class RedactionFilter(logging.Filter):
    """Redacts the message, its args and every extra field of each record in place (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = REDACTOR.values()
        _redact_message(record, values)
        for key, value in extra_fields(record).items():
            if isinstance(value, str | bytes | Mapping | list | tuple):
                setattr(record, key, REDACTOR.value(value, values))
        if record.exc_info and not record.exc_text:
            # Exception messages can echo a URL or a header: format the traceback once, redacted.
            record.exc_text = REDACTOR.text(logging.Formatter().formatException(record.exc_info), values)
            record.exc_info = None
        return True


_factory_lock = threading.Lock()
_factory_installed = False


def install_record_factory() -> None:
    """Redact message and args when any record is created in this process, whichever logger creates it.

    Handlers we do not own (Dagster's event-log handler, which feeds the UI) then see clean records too.
    Extra fields are added after the factory runs, so the handler filter redacts those.
    """
    global _factory_installed
    with _factory_lock:
        if _factory_installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            with contextlib.suppress(Exception):  # logging must never fail because of redaction
                _redact_message(record, REDACTOR.values())
            return record

        logging.setLogRecordFactory(factory)
        _factory_installed = True


# ------------------------------------------------------------------------------------------------ formatting

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
APPROVAL_TAG = "runtime_ops/approval_id"
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
        from runtime_ops.settings import get_settings

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


def register_settings_secrets(settings: Any, *more: str | None) -> None:
    """Treat the secret values of an explicit Settings object (and `more`) as secrets in this process's logs."""
    values: list[str | None] = list(more)
    for field in ("slack_bot_token", "slack_signing_secret", "link_secret", "model_api_key", "webhook_secret"):
        secret = getattr(settings, field, None)
        values.append(secret.get_secret_value() if secret else None)
    secret = getattr(settings, "alert_token", None)
    values.append(secret.get_secret_value() if secret else None)
    values += [
        _url_password(getattr(settings, "database_url", None)),
        _url_password(getattr(settings, "redis_url", None)),
    ]
    register_secret(*values)
