"""The log formatters, bound fields and redaction, on plain LogRecords (no Dagster run)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from runtime_ops.observability import logs, tracing
from runtime_ops.settings import SettingsError, get_settings, load_settings

TOKEN = "xoxb-unit-planted-0123456789"
SIGNING = "unit-signing-secret-abcdef"


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("SLACK_APPROVAL_CHANNEL", "C1")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING)
    monkeypatch.setenv("RUNTIME_OPS_DATABASE_URL", "postgresql://app:s3cr3t-db-pw@db:5432/ops")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _logger(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(logs.RedactionFilter())
    logger = logging.Logger("runtime_ops.unit")
    logger.addHandler(handler)
    return logger, stream


def test_json_line_has_bound_fields_extras_and_the_current_span() -> None:
    logger, stream = _logger(logs.JsonFormatter())
    with (
        logs.bind(run_id="r-1", asset="raw_documents", batch_id="b-7"),
        tracing.tracer().start_as_current_span("s") as span,
    ):
        logger.info("parsed %d documents", 3, extra={"status": "succeeded", "duration_ms": 12.5})
    doc = json.loads(stream.getvalue())
    assert list(doc)[:4] == ["ts", "level", "logger", "message"]
    assert doc["message"] == "parsed 3 documents" and doc["level"] == "info" and doc["logger"] == "runtime_ops.unit"
    assert (doc["run_id"], doc["asset"], doc["batch_id"], doc["status"], doc["duration_ms"]) == (
        "r-1",
        "raw_documents",
        "b-7",
        "succeeded",
        12.5,
    )
    assert doc["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert doc["ts"].endswith("Z")
    logger.info("outside")
    assert "run_id" not in json.loads(stream.getvalue().splitlines()[1])  # the binding ended with its block


def test_a_dagster_event_record_becomes_status_and_duration() -> None:
    logger, stream = _logger(logs.JsonFormatter())
    event = SimpleNamespace(
        event_type=SimpleNamespace(value="STEP_SUCCESS"),
        event_specific_data=SimpleNamespace(duration_ms=1234.56),
        asset_key=None,
        step_key="raw_documents",
    )
    meta = {
        "run_id": "run-9",
        "job_name": "ingest_job",
        "job_tags": {"dagster/partition": "batch-1", "runtime_ops/approval_id": "apr-1"},
        "step_key": "raw_documents",
        "resource_name": None,
        "dagster_event": event,
        "orig_message": 'Finished execution of step "raw_documents" in 1.23s.',
    }
    logger.debug("ingest_job - run-9 - raw_documents - STEP_SUCCESS - ...", extra={"dagster_meta": meta})
    doc = json.loads(stream.getvalue())
    assert doc["message"].startswith("Finished execution") and doc["logger"] == "dagster"
    assert (doc["run_id"], doc["job"], doc["step"], doc["status"], doc["duration_ms"]) == (
        "run-9",
        "ingest_job",
        "raw_documents",
        "succeeded",
        1234.6,
    )
    assert (doc["partition"], doc["approval_id"], doc["event"]) == ("batch-1", "apr-1", "STEP_SUCCESS")


def test_console_line_is_readable() -> None:
    logger, stream = _logger(logs.ConsoleFormatter())
    with logs.bind(run_id="1a2b3c4d-0000", asset="retrieval_index", step="retrieval_index"):
        logger.warning("swapped", extra={"status": "succeeded", "duration_ms": 5.0})
    line = stream.getvalue().strip()
    assert "WARNING" in line and "runtime_ops.unit" in line and line.endswith("swapped")
    assert "[run=1a2b3c4d asset=retrieval_index status=succeeded 5.0ms]" in line


@pytest.mark.usefixtures("planted")
def test_secret_settings_are_redacted_in_message_args_extras_and_exceptions() -> None:
    logger, stream = _logger(logs.JsonFormatter())
    try:
        raise RuntimeError(f"connect failed with {SIGNING}")
    except RuntimeError:
        logger.exception(
            "token %s url %s",
            TOKEN,
            {"db": "postgresql://app:s3cr3t-db-pw@db:5432/ops"},
            extra={"headers": {"Authorization": f"Bearer {TOKEN}"}, "items": [SIGNING]},
        )
    text = stream.getvalue()
    for secret in (TOKEN, SIGNING, "s3cr3t-db-pw"):
        assert secret not in text
    doc = json.loads(text)
    assert doc["message"].count("[REDACTED]") == 2 and "postgresql://app:[REDACTED]@db" in doc["message"]
    assert doc["items"] == ["[REDACTED]"] and "[REDACTED]" in doc["exc"]


def test_link_tokens_slack_tokens_and_url_passwords_are_redacted_by_shape() -> None:
    from datetime import UTC, datetime, timedelta

    from runtime_ops.approvals import links

    token = links.issue(
        "k" * 32, request_id="apr-1", approver="U1", digest="d" * 64, expires_at=datetime.now(UTC) + timedelta(hours=1)
    )
    cases = {
        f"open https://ops.example/approvals/{token} now": "open https://ops.example/approvals/[REDACTED] now",
        f"token={token}": "token=[REDACTED]",
        "bot xoxb-1111-2222-abcdefgh": "bot [REDACTED]",
        "redis://:hunter2hunter@cache:6379/0": "redis://:[REDACTED]@cache:6379/0",
        "GET /api/approvals?status=pending": "GET /api/approvals?status=pending",
        # A traceback's file under runtime_ops/approvals/ is a path, not a link token.
        'File "/srv/runtime_ops/approvals/lifecycle_gate.py", line 3': (
            'File "/srv/runtime_ops/approvals/lifecycle_gate.py", line 3'
        ),
    }
    for text, expected in cases.items():
        assert logs.REDACTOR.text(text, ()) == expected


def test_one_helper_shows_urls_without_their_passwords_in_messages_and_logs() -> None:
    """`redact_url` is what the CLI prints and what the log filter applies: a password ends at the '@' as SQLAlchemy
    reads it (an unencoded '/' in it does not leave its tail readable), and libpq's `password=` parameter goes too."""
    from runtime_ops.observability.redaction import redact_url

    cases = {
        "postgresql://ops:pa/ss@db:5432/state": "postgresql://ops:[REDACTED]@db:5432/state",
        "postgresql://db/state?user=ops&password=hunter2&sslmode=require": (
            "postgresql://db/state?user=ops&password=[REDACTED]&sslmode=require"
        ),
        "postgresql://ops@db:5432/state": "postgresql://ops@db:5432/state",
        "sqlite:////var/lib/runtime_ops/state.db": "sqlite:////var/lib/runtime_ops/state.db",
    }
    for url, shown in cases.items():
        assert redact_url(url) == shown and logs.REDACTOR.text(f"store {url}.", ()) == f"store {shown}."


def test_the_record_factory_redacts_records_that_never_reach_our_handlers(planted: None) -> None:
    logs.install_record_factory()
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    other = logging.Logger("someone.else")
    other.addHandler(Keep())
    other.warning("leaking %s", SimpleNamespace(token=TOKEN))  # str() of an arbitrary object carries it
    assert TOKEN not in seen[0].getMessage() and "[REDACTED]" in seen[0].getMessage()


def test_log_format_setting_is_validated_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_OPS_LOG_FORMAT", "Console ")
    assert load_settings().log_format == "console"
    monkeypatch.setenv("RUNTIME_OPS_LOG_FORMAT", "xml")
    with pytest.raises(
        SettingsError, match=r"RUNTIME_OPS_LOG_FORMAT \(got 'xml'\): Input should be 'json' or 'console'"
    ):
        load_settings()


def test_configure_logging_replaces_its_handler_instead_of_adding_one() -> None:
    target = logging.getLogger("runtime_ops")
    before = [h for h in target.handlers if getattr(h, "runtime_ops", False)]
    logs.configure_logging(fmt="json")
    logs.configure_logging(fmt="console")
    ours: list[Any] = [h for h in target.handlers if getattr(h, "runtime_ops", False)]
    assert len(ours) == 1 and isinstance(ours[0].formatter, logs.ConsoleFormatter)
    logs.configure_logging(fmt="json")
    assert len(before) <= 1


def test_new_settings_bring_their_secrets_at_once_even_when_python_reuses_the_old_objects_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The redaction cache is checked against the settings object itself: a fresh settings object allocated where
    the freed one lived (same id) must not be served the old secrets."""
    from runtime_ops.observability.redaction import REDACTOR

    for i in range(30):
        secret = f"rotated-signing-secret-{i:04d}-abcdef"
        monkeypatch.setenv("SLACK_SIGNING_SECRET", secret)
        monkeypatch.setenv("SLACK_BOT_TOKEN", f"xoxb-rotated-{i:04d}-0123456789")
        monkeypatch.setenv("SLACK_APPROVAL_CHANNEL", "C1")
        get_settings.cache_clear()
        get_settings()
        assert secret in REDACTOR.values(), f"round {i}: the new secret is not redacted yet"
    get_settings.cache_clear()
