"""Run trace ids, traceparent links and the approval decision span, on the in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime_ops.observability import tracing


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = tracing.install_memory_exporter()
    exporter.clear()
    yield exporter
    exporter.clear()


def test_a_run_id_is_the_trace_id_of_root_spans_only(spans) -> None:
    run_id = "2c78af36-106e-4072-8432-d4a9986fc7d6"
    assert tracing.trace_id_for_run(run_id) == int("2c78af36106e40728432d4a9986fc7d6", 16)
    assert tracing.trace_id_for_run("run-1") is None and tracing.trace_id_for_run(None) is None
    with tracing.run_trace(run_id), tracing.new_root(), tracing.tracer().start_as_current_span("step"):
        tracing.tracer().start_span("child").end()  # a child of "step": the current span
    with tracing.tracer().start_as_current_span("elsewhere"):
        pass
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert format(by_name["step"].context.trace_id, "032x") == run_id.replace("-", "")
    assert by_name["child"].context.trace_id == by_name["step"].context.trace_id
    assert by_name["elsewhere"].context.trace_id != by_name["step"].context.trace_id


def test_traceparent_round_trips_into_a_link() -> None:
    with tracing.tracer().start_as_current_span("request") as span:
        value = tracing.traceparent()
    ctx = span.get_span_context()
    assert value is not None and value.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    [link] = tracing.link_from(value, **{"approval.id": "apr-1"})
    assert (link.context.trace_id, link.context.span_id) == (ctx.trace_id, ctx.span_id)
    assert tracing.link_from(None) == [] and tracing.link_from("garbage") == []


def test_decision_span_links_to_the_request_and_measures_the_wait(spans) -> None:
    with tracing.approval_request_span(**{"approval.id": "apr-1"}) as request_span:
        stored = tracing.traceparent(request_span)
    opened = datetime(2026, 1, 1, 12, 0)  # naive, as SQLite returns it: UTC
    request = {"created_at": opened, "trace_context": stored, "status": "approved", "kind": "human"}
    tracing.record_approval_decision(
        request,
        request_id="apr-1",
        channel="cli",
        action="approve",
        outcome="accepted",
        start_time_ns=1,
        now=opened.replace(tzinfo=UTC) + timedelta(minutes=90),
    )
    [decision] = [s for s in spans.get_finished_spans() if s.name == "approval.decision"]
    assert decision.attributes["approval.wait_seconds"] == 5400.0
    assert (decision.attributes["approval.outcome"], decision.attributes["approval.status"]) == ("accepted", "approved")
    [link] = decision.links
    assert link.context.span_id == request_span.get_span_context().span_id


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@api.example:8443/v1/chat?key=abc#x", "https://api.example:8443/v1/chat"),
        ("http://127.0.0.1:5000/bucket/key?list-type=2&prefix=a", "http://127.0.0.1:5000/bucket/key"),
        (None, None),
    ],
)
def test_safe_url_drops_credentials_query_and_fragment(url: str | None, expected: str | None) -> None:
    assert tracing.safe_url(url) == expected
