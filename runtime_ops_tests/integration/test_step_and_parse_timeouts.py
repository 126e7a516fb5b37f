"""Timeouts on a real run (PostgreSQL state store and Dagster storage): a document whose parse outlasts
timeouts.parse_document is quarantined as too slow and its batch completes; a step past its job's step timeout
fails and its retry policy runs it again; a PostgreSQL statement past RUNTIME_OPS_DB_STATEMENT_TIMEOUT is
cancelled by the server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.flow import Flow

SLOW_OPS = 200_000  # text operators in one content stream: pypdf needs ~10 s to extract them here


def slow_pdf(n_ops: int) -> bytes:
    """A small, valid one-page PDF whose text extraction is slow: one content stream of `n_ops` text runs."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj 1 0 Td " * n_ops + b"ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _landing(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    (landing / "notes").mkdir(parents=True)
    for i in range(3):
        (landing / "notes" / f"note{i}.md").write_text(f"# Note {i}\n\nA short note about retries and timeouts {i}.\n")
    return landing


def test_a_document_that_parses_too_long_is_quarantined_and_its_batch_completes(
    env: Any, postgres_url: str, dagster_instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    landing = _landing(tmp_path)
    (landing / "slow.pdf").write_bytes(slow_pdf(SLOW_OPS))
    env(database_url=postgres_url, landing=str(landing), RUNTIME_OPS_PARSE_TIMEOUT="1s")
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="demo")

    started = time.monotonic()
    [result] = Flow(dagster_instance).tick_and_run("landing_sensor")
    took = time.monotonic() - started

    assert result.success
    [batch] = store.ledger.batches()
    assert batch["status"] == "ingested"
    docs = {d["key"]: d for d in store.documents.batch_documents(batch["id"])}
    slow = docs.pop("slow.pdf")
    assert slow["status"] == "quarantined" and slow["quarantine_code"] == "too_slow"
    assert "parsing slow.pdf took longer than its 1 s timeout" in slow["reason"]
    assert "RUNTIME_OPS_PARSE_TIMEOUT" in slow["reason"]
    assert {d["status"] for d in docs.values()} == {"ok"} and len(docs) == 3
    assert took < 30, f"the run took {took:.1f} s: the slow parse was not cut short"


def test_a_step_past_its_timeout_fails_and_is_retried_by_its_policy(
    env: Any, postgres_url: str, dagster_instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: Any
) -> None:
    landing = _landing(tmp_path)
    markers = tmp_path / "failpoints"
    markers.mkdir()
    env(database_url=postgres_url, landing=str(landing), RUNTIME_OPS_STEP_TIMEOUT="2s")
    # The first attempt of raw_documents stalls for 30 s (once: its retry goes through).
    monkeypatch.setenv("RUNTIME_OPS_FAILPOINTS", "documents.parse=once:sleep:30")
    monkeypatch.setenv("RUNTIME_OPS_FAILPOINT_DIR", str(markers))
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="demo")
    flow = Flow(dagster_instance)
    [request] = flow.tick("landing_sensor")
    assert flow.job_for("landing_sensor", request).tags["runtime_ops/step_timeout_s"] == "2"  # the job carries it

    started = time.monotonic()
    result = flow.run("landing_sensor", request)
    took = time.monotonic() - started

    assert result.success
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert [e.step_key for e in retries] == ["demo__raw_documents"]
    error = str(retries[0].step_retry_data.error)
    assert "DeadlineExceeded" in error and "step demo__raw_documents took longer than its 2 s timeout" in error
    [batch] = store.ledger.batches()
    assert batch["status"] == "ingested"
    assert {d["status"] for d in store.documents.batch_documents(batch["id"])} == {"ok"}
    assert took < 25, f"the run took {took:.1f} s: the stalled step was not cut at its timeout"


def test_a_statement_past_the_statement_timeout_is_cancelled_by_the_server(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url, RUNTIME_OPS_DB_STATEMENT_TIMEOUT="1s")
    store = open_store(get_settings().resolved_database_url, get_settings())
    started = time.monotonic()
    with pytest.raises(OperationalError, match="statement timeout"), store.engine.connect() as conn:
        conn.execute(text("SELECT pg_sleep(10)"))
    assert time.monotonic() - started < 5
    with store.engine.connect() as conn:  # the pool hands out a healthy connection afterwards
        assert conn.execute(text("SELECT 1")).scalar() == 1
