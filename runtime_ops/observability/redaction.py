"""Secret redaction for every log line: setting values, URL passwords, Slack tokens, bearer credentials, ops API
keys and signed approval-link tokens become `[REDACTED]`, in the message, its args, every extra field and tracebacks.

`RedactionFilter` sits on every handler runtime_ops configures; a log-record factory (`install_record_factory`)
redacts message and args when a record is created, so records that only reach Dagster's event log are clean too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from runtime_ops.settings import get_settings

REDACTED = "[REDACTED]"

# Setting names whose values are secrets (the SecretStr fields of runtime_ops.settings.Settings, plus the
# cloud credentials boto3 reads from the environment).
SECRET_SETTINGS = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "RUNTIME_OPS_LINK_SECRET",
    "RUNTIME_OPS_MODEL_API_KEY",
    "RUNTIME_OPS_WEBHOOK_SECRET",
    "RUNTIME_OPS_ALERT_TOKEN",
    "RUNTIME_OPS_AUDIT_KEY",
    "RUNTIME_OPS_OPERATOR_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
URL_SETTINGS = ("RUNTIME_OPS_DATABASE_URL", "REDIS_URL", "RUNTIME_OPS_VECTOR_STORE")
# Shorter values are too likely to occur by chance ("pw" in "pwd"); they are still removed from URLs by pattern.
MIN_SECRET_LENGTH = 6

# A URL's password runs from the ':' after the user name to the next '@', as SQLAlchemy reads it: an unencoded '/'
# in a password does not end it early (urllib would end the host part there and show the rest).
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)[^\s@]+(@)")
# libpq also takes the password as a query parameter.
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&#\s]+", re.IGNORECASE)


def redact_url(text: str) -> str:
    """`text` (a URL, or a message holding URLs) with every URL's password replaced by `[REDACTED]`; the user name,
    host, port and path stay readable. The one way runtime_ops shows a URL that may carry credentials."""
    return _QUERY_PASSWORD.sub(r"\1" + REDACTED, _URL_PASSWORD.sub(r"\1" + REDACTED + r"\2", text))


_PATTERNS = (
    # The token segment of signed approval links (/approvals/<token>, over 100 characters), whatever host serves
    # them; 40 leaves file names under a folder called approvals (runtime_ops/approvals/lifecycle_gate.py) readable.
    (re.compile(r"(/approvals/)[A-Za-z0-9_\-.%]{40,}"), r"\1" + REDACTED),
    # A bare itsdangerous/JWT-style token: base64 JSON ('{"...' = 'eyJ') or, compressed, '.' + zlib ('eJ'),
    # then a signature.
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-.]{16,}"), REDACTED),
    (re.compile(r"\.eJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"), REDACTED),
    # Slack tokens (bot, user, app, refresh...).
    (re.compile(r"\bxox[abeoprs]-[A-Za-z0-9\-]{8,}"), REDACTED),
    # The password of any URL with credentials (postgresql://user:pw@host, redis://:pw@host, ?password=pw).
    (_URL_PASSWORD, r"\1" + REDACTED + r"\2"),
    (_QUERY_PASSWORD, r"\1" + REDACTED),
    # Bearer credentials in headers that end up in messages.
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9_\-.~+/=]{8,}"), r"\1" + REDACTED),
    # Ops API keys (runtime_ops.store.operations.api_keys: rok_<8 hex>_<secret>): the key id stays readable, the
    # secret goes, even a truncated one. After the bearer rule, which takes a whole `Bearer <key>` first.
    (re.compile(r"(rok_[0-9a-f]{8}_)[A-Za-z0-9_\-]+"), r"\1" + REDACTED),
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
        # The settings object the cache was checked against, held (not its id: a new object may reuse a freed
        # one's id, and the cache would then keep the old secrets).
        self._checked_settings: object = None
        self._checked_until = 0.0

    def register(self, *values: str | None) -> None:
        with self._lock:
            self._extra.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)
            self._cache_key = None

    def _settings_values(self) -> tuple[int, list[str]]:
        values: list[str] = []
        ident = 0
        try:
            settings = get_settings()
            ident = id(settings)
            for field in (
                "slack_bot_token",
                "slack_signing_secret",
                "link_secret",
                "model_api_key",
                "audit_key",
                "operator_key",
            ):
                secret = getattr(settings, field)
                values.append(secret.get_secret_value() if secret else "")
            for field in ("webhook_secret", "alert_token"):
                secret = getattr(settings, field)
                values.append(secret.get_secret_value() if secret else "")
            values += [_url_password(settings.database_url) or "", _url_password(settings.redis_url) or ""]
            values.append(_url_password(settings.vector_store) or "")
            for name, given in (("link_secret", settings.link_secret), ("audit_key", settings.audit_key)):
                home_file = settings.resolved_home / name
                if not given and home_file.is_file():
                    values.append(home_file.read_text().strip())
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
        current = self._current_settings()
        with self._lock:
            if (
                self._cache_key is not None
                and current is not None
                and current is self._checked_settings
                and now < self._checked_until
            ):
                return self._values
        ident, found = self._settings_values()
        key = (ident, frozenset(found))
        with self._lock:
            if key != self._cache_key:
                found_all = {v for v in found if v and len(v) >= MIN_SECRET_LENGTH} | self._extra
                # Longest first, so a secret containing another is replaced whole.
                self._values = tuple(sorted(found_all, key=len, reverse=True))
                self._cache_key = key
            self._checked_settings, self._checked_until = current, now + 1.0
            return self._values

    @staticmethod
    def _current_settings() -> object:
        try:
            return get_settings()
        except Exception:
            return None

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


def register_settings_secrets(settings: Any, *more: str | None) -> None:
    """Treat the secret values of an explicit Settings object (and `more`) as secrets in this process's logs."""
    values: list[str | None] = list(more)
    for field in (
        "slack_bot_token",
        "slack_signing_secret",
        "link_secret",
        "model_api_key",
        "webhook_secret",
        "audit_key",
        "operator_key",
    ):
        secret = getattr(settings, field, None)
        values.append(secret.get_secret_value() if secret else None)
    secret = getattr(settings, "alert_token", None)
    values.append(secret.get_secret_value() if secret else None)
    values += [
        _url_password(getattr(settings, "database_url", None)),
        _url_password(getattr(settings, "redis_url", None)),
        _url_password(getattr(settings, "vector_store", None)),
    ]
    register_secret(*values)
