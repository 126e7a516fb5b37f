"""OpenTelemetry traces: one TracerProvider per process, client spans for S3 / Slack / model calls, and the
approval wait linked from the request to its decision.

- `tracer()` configures the provider on first use: service.name=runtime_ops plus resource attributes; an OTLP
  HTTP exporter behind a BatchSpanProcessor only when OTEL_EXPORTER_OTLP_ENDPOINT (or
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. Export runs on the processor's thread with a short timeout, so an
  unreachable collector never blocks or fails a step (spans are dropped and OpenTelemetry logs a warning).
- `install_memory_exporter()`: tests read finished spans from an InMemorySpanExporter.
- `run_trace(run_id)`: spans started inside get the Dagster run id as their trace id (a run id is a UUID, the
  same 128 bits), so every step span of a run sits in one trace you can look up by the run id.
- `traceparent()` / `link_from()`: the W3C `traceparent` of the current span, stored on the approval request,
  and the Link a decision span and the promotion's step span make back to it.
- `client_span()`, `instrument_boto3_client()`: CLIENT spans with http.method, a URL without its query string
  or credentials, and the status code.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

SERVICE_NAME = "runtime_ops"
TRACER_NAME = "runtime_ops"
# Without an explicit timeout, an unreachable collector holds the export thread (and process exit) for 10 s.
DEFAULT_EXPORT_TIMEOUT_S = 2.0

_lock = threading.Lock()
_provider: TracerProvider | None = None
_provider_pid: int | None = None
_forced_trace_id: ContextVar[int | None] = ContextVar("runtime_ops_trace_id", default=None)
_propagator = TraceContextTextMapPropagator()


class _RunAwareIdGenerator(RandomIdGenerator):
    """A new trace takes the id set by `run_trace` (the Dagster run id) when there is one."""

    def generate_trace_id(self) -> int:
        forced = _forced_trace_id.get()
        return forced if forced else super().generate_trace_id()


def _resource() -> Resource:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        version = package_version("runtime_ops")
    except PackageNotFoundError:
        version = "dev"
    attrs: dict[str, Any] = {
        "service.name": os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME,
        "service.namespace": "runtime_ops",
        "service.version": version,
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
    }
    # Resource.create also merges OTEL_RESOURCE_ATTRIBUTES (e.g. deployment.environment=prod).
    return Resource.create(attrs)


def otlp_endpoint() -> str | None:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None


def _export_timeout() -> float:
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    try:
        return float(raw) if raw else DEFAULT_EXPORT_TIMEOUT_S
    except ValueError:
        return DEFAULT_EXPORT_TIMEOUT_S


def provider() -> TracerProvider:
    """This process's TracerProvider, configured once (again in a forked child)."""
    global _provider, _provider_pid
    if _provider is not None and _provider_pid == os.getpid():
        return _provider
    with _lock:
        if _provider is not None and _provider_pid == os.getpid():
            return _provider
        new = TracerProvider(resource=_resource(), id_generator=_RunAwareIdGenerator())
        if otlp_endpoint():
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            # The exporter reads the endpoint, headers and compression from the OTEL_* variables itself.
            new.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=_export_timeout())))
        _provider, _provider_pid = new, os.getpid()
        # Also the global provider, for libraries that trace through the API (first one set wins; ours is
        # used directly below either way).
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            trace.set_tracer_provider(new)
        return new


def tracer() -> trace.Tracer:
    return provider().get_tracer(TRACER_NAME)


def install_memory_exporter() -> Any:
    """Add an InMemorySpanExporter (synchronous) to this process's provider and return it (tests)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider().add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def shutdown(timeout_ms: int = 2000) -> None:
    """Flush and stop this process's exporters (bounded; a dead collector only costs the timeout)."""
    global _provider
    with _lock:
        if _provider is not None:
            _provider.force_flush(timeout_ms)
            _provider.shutdown()
            _provider = None


# ------------------------------------------------------------------------------------------------ run traces

_HEX32 = re.compile(r"^[0-9a-f]{32}$")


def trace_id_for_run(run_id: str | None) -> int | None:
    """The trace id of a Dagster run: its UUID's 128 bits (None for ids that are not UUIDs)."""
    if not run_id:
        return None
    hex_id = run_id.replace("-", "").lower()
    if not _HEX32.match(hex_id) or int(hex_id, 16) == 0:
        return None
    return int(hex_id, 16)


@contextlib.contextmanager
def run_trace(run_id: str | None) -> Iterator[None]:
    """Root spans started inside get the run's trace id (spans with a parent keep their parent's)."""
    token = _forced_trace_id.set(trace_id_for_run(run_id))
    try:
        yield
    finally:
        _forced_trace_id.reset(token)


# ------------------------------------------------------------------------------------------------ links


def traceparent(span: trace.Span | None = None) -> str | None:
    """The W3C traceparent of `span` (default: the current span), or None without a valid span."""
    span = span or trace.get_current_span()
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def span_context_from(value: str | None) -> trace.SpanContext | None:
    if not value:
        return None
    ctx = _propagator.extract({"traceparent": value})
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return span_ctx if span_ctx.is_valid else None


def link_from(value: str | None, **attributes: Any) -> list[Link]:
    """A Link to the span a stored traceparent names (an empty list when there is none or it is malformed)."""
    span_ctx = span_context_from(value)
    return [Link(span_ctx, attributes={k: v for k, v in attributes.items() if v is not None})] if span_ctx else []


@contextlib.contextmanager
def new_root() -> Iterator[None]:
    """Spans started inside begin a new trace, whatever span is current (e.g. a decision in an HTTP handler)."""
    token = otel_context.attach(otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


# ------------------------------------------------------------------------------------------------ client spans


def safe_url(url: str | None) -> str | None:
    """`url` without userinfo, query string or fragment (signatures, tokens and keys travel there)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class ClientSpan:
    """What a client span's body can report: the response status, or a retry count."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def status_code(self, code: int | None) -> None:
        if code is None:
            return
        self.span.set_attribute("http.response.status_code", int(code))
        self.span.set_attribute("http.status_code", int(code))  # the pre-1.21 name, which many backends still read
        if code >= 400:
            self.span.set_status(Status(StatusCode.ERROR, f"HTTP {code}"))

    def set(self, **attributes: Any) -> None:
        for key, value in attributes.items():
            if value is not None:
                self.span.set_attribute(key, value)


@contextlib.contextmanager
def client_span(name: str, *, method: str, url: str | None, **attributes: Any) -> Iterator[ClientSpan]:
    """A CLIENT span around one outgoing call; an exception is recorded and re-raised."""
    clean = safe_url(url)
    attrs: dict[str, Any] = {"http.request.method": method, "http.method": method}
    if clean:
        attrs.update({"url.full": clean, "http.url": clean})
        host = urlsplit(clean).hostname
        if host:
            attrs["server.address"] = host
    attrs.update({k: v for k, v in attributes.items() if v is not None})
    with tracer().start_as_current_span(
        name, kind=SpanKind.CLIENT, attributes=attrs, record_exception=True, set_status_on_exception=True
    ) as span:
        yield ClientSpan(span)


# botocore: one span per API call (retries included), opened on `before-call` and closed on `after-call`
# (or `after-call-error`), carried in the call's request context dict.
_BOTO_SPAN_KEY = "runtime_ops_span"
_BOTO_BUCKET_KEY = "runtime_ops_bucket"


def _boto_params(params: Any = None, context: Any = None, **_: Any) -> None:
    # The bucket is an API parameter, gone from the serialized request `before-call` sees.
    if isinstance(context, dict) and isinstance(params, Mapping) and isinstance(params.get("Bucket"), str):
        context[_BOTO_BUCKET_KEY] = params["Bucket"]


def _boto_before_call(model: Any = None, params: Any = None, context: Any = None, **_: Any) -> None:
    if context is None or model is None:
        return
    service_name = str(getattr(model.service_model, "service_id", "aws"))
    method = (params or {}).get("method", "POST") if isinstance(params, Mapping) else "POST"
    url = (params or {}).get("url") if isinstance(params, Mapping) else None
    attrs: dict[str, Any] = {
        "rpc.system": "aws-api",
        "rpc.service": service_name,
        "rpc.method": model.name,
        "http.request.method": method,
        "http.method": method,
    }
    clean = safe_url(url)
    if clean:
        attrs.update({"url.full": clean, "http.url": clean, "server.address": urlsplit(clean).hostname or ""})
    bucket = context.get(_BOTO_BUCKET_KEY) if isinstance(context, dict) else None
    if bucket:
        attrs["aws.s3.bucket"] = bucket
    span = tracer().start_span(f"{service_name}.{model.name}", kind=SpanKind.CLIENT, attributes=attrs)
    context[_BOTO_SPAN_KEY] = span


def _boto_after_call(http_response: Any = None, parsed: Any = None, context: Any = None, **_: Any) -> None:
    span = context.pop(_BOTO_SPAN_KEY, None) if isinstance(context, dict) else None
    if span is None:
        return
    status = getattr(http_response, "status_code", None)
    if status is None and isinstance(parsed, Mapping):
        status = (parsed.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    if isinstance(parsed, Mapping):
        retries = (parsed.get("ResponseMetadata") or {}).get("RetryAttempts")
        if retries:
            span.set_attribute("http.request.resend_count", int(retries))
    ClientSpan(span).status_code(status)
    span.end()


def _boto_after_call_error(exception: BaseException | None = None, context: Any = None, **_: Any) -> None:
    span = context.pop(_BOTO_SPAN_KEY, None) if isinstance(context, dict) else None
    if span is None:
        return
    if exception is not None:
        span.record_exception(exception)
        span.set_status(Status(StatusCode.ERROR, type(exception).__name__))
    span.end()


def instrument_boto3_client(client: Any) -> Any:
    """Register the span hooks on one boto3 client (idempotent); returns the client."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is None or getattr(client, "_runtime_ops_traced", False):
        return client
    events.register("before-parameter-build", _boto_params, unique_id="runtime_ops-trace-params")
    events.register("before-call", _boto_before_call, unique_id="runtime_ops-trace-before")
    events.register("after-call", _boto_after_call, unique_id="runtime_ops-trace-after")
    events.register("after-call-error", _boto_after_call_error, unique_id="runtime_ops-trace-error")
    with contextlib.suppress(AttributeError):  # botocore clients accept attributes; a stand-in may not
        client._runtime_ops_traced = True
    return client


# ------------------------------------------------------------------------------------------------ approvals


@contextlib.contextmanager
def approval_request_span(**attributes: Any) -> Iterator[trace.Span]:
    """The span of opening an approval request; its traceparent is what the request row keeps."""
    with tracer().start_as_current_span(
        "approval.request", attributes={k: v for k, v in attributes.items() if v is not None}
    ) as span:
        yield span


def _as_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def record_approval_decision(
    request: Mapping[str, Any] | None,
    *,
    request_id: str,
    channel: str,
    action: str,
    outcome: str,
    start_time_ns: int,
    now: datetime | None = None,
) -> trace.Span:
    """The `approval.decision` span of one decision attempt (Slack click, signed link, CLI), linked to the span
    that opened the request (its stored traceparent), with the time the request had waited. Recorded by
    `runtime_ops.decisions.decide.decide`, the one caller.

    Recorded after the vote's transaction, with the attempt's start time: the link needs the request row,
    which the vote reads under its lock anyway, so no extra read is added to the click path.
    """
    request = request or {}
    created = _as_utc(request.get("created_at"))
    decided = _as_utc(now) or datetime.now(UTC)
    attrs: dict[str, Any] = {
        "approval.id": request_id,
        "approval.outcome": outcome,
        "approval.action": action,
        "approval.channel": channel,
        "approval.status": request.get("status"),
        "approval.kind": request.get("kind"),
        "approval.candidate_version": request.get("candidate_version"),
    }
    if created is not None:
        attrs["approval.wait_seconds"] = max(0.0, (decided - created).total_seconds())
    links = link_from(request.get("trace_context"), **{"approval.id": request_id})
    span = tracer().start_span(
        "approval.decision",
        kind=SpanKind.INTERNAL,
        attributes={k: v for k, v in attrs.items() if v is not None},
        links=links,
        start_time=start_time_ns,
    )
    span.end()
    return span
